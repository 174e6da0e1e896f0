// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing | FileCheck %s --check-prefix=FSDP
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=dp=2,fsdp=2 axes=dp,fsdp" --plan-insert-collectives --plan-bucketing | FileCheck %s --check-prefix=HSDP
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2,tp=2 axes=fsdp,tp" --plan-insert-collectives --plan-bucketing | FileCheck %s --check-prefix=FSDPTP

// plan-bucketing after the pipeline: per FSDP unit ("layers.N", "root") one
// all-gather of a flat bucket per pass and one reduce-scatter of the flat
// gradient bucket (then one all-reduce over dp under HSDP). Under fsdp x tp
// each unit holds one dim-0 and one dim-1 parameter; they share the bucket,
// and `split_dims` rebuilds (and scatters) the dim-1 one along dim 1.

// Tests the exact collective sequence of a 2-unit MLP (layers.0, layers.1).
// FSDP-LABEL: func.func @mlp(
// FSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 64] : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<128xf32>
// FSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<128xf32> -> tensor<512xf32>
// FSDP-NEXT: dist.free %[[V0]] : tensor<128xf32>
// FSDP-NEXT: %[[V2:[a-z0-9_]+]]:2 = dist.unbucket %[[V1]] offsets = [0, 64] chunks = 4 : tensor<512xf32> -> tensor<16x16xf32>, tensor<16x16xf32>
// FSDP-NEXT: %[[V3:[a-z0-9_]+]] = nn.linear %arg0, %[[V2]]#0
// FSDP-NEXT: %[[V4:[a-z0-9_]+]] = nn.silu %[[V3]]
// FSDP-NEXT: %[[V5:[a-z0-9_]+]] = nn.linear %[[V4]], %[[V2]]#1
// FSDP-NEXT: dist.free %[[V1]] : tensor<512xf32>
// FSDP-NEXT: %[[V6:[a-z0-9_]+]] = nn.silu %[[V5]]
// FSDP-NEXT: %[[V7:[a-z0-9_]+]] = dist.bucket %arg4, %arg5 offsets = [0, 64] : tensor<4x16xf32>, tensor<4x12xf32> -> tensor<112xf32>
// FSDP-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %[[V7]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> tensor<448xf32>
// FSDP-NEXT: dist.free %[[V7]] : tensor<112xf32>
// FSDP-NEXT: %[[V9:[a-z0-9_]+]]:2 = dist.unbucket %[[V8]] offsets = [0, 64] chunks = 4 : tensor<448xf32> -> tensor<16x16xf32>, tensor<16x12xf32>
// FSDP-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V6]], %[[V9]]#0
// FSDP-NEXT: %[[V11:[a-z0-9_]+]] = nn.silu %[[V10]]
// FSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V9]]#1
// FSDP-NEXT: dist.free %[[V8]] : tensor<448xf32>
// FSDP-NEXT: %[[V13:[a-z0-9_]+]] = nn.cross_entropy %[[V12]], %arg1
// FSDP-NEXT: %[[V14:[a-z0-9_]+]] = dist.all_reduce %[[V13]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// FSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V12]], %arg1, %arg6 scale 1.250000e-01
// FSDP-NEXT: %[[V16:[a-z0-9_]+]] = dist.bucket %arg5, %arg4 offsets = [0, 48] : tensor<4x12xf32>, tensor<4x16xf32> -> tensor<112xf32>
// FSDP-NEXT: %[[V17:[a-z0-9_]+]] = dist.all_gather %[[V16]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> tensor<448xf32>
// FSDP-NEXT: dist.free %[[V16]] : tensor<112xf32>
// FSDP-NEXT: %[[V18:[a-z0-9_]+]]:2 = dist.unbucket %[[V17]] offsets = [0, 48] chunks = 4 : tensor<448xf32> -> tensor<16x12xf32>, tensor<16x16xf32>
// FSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.matmul %[[V15]], %[[V18]]#0 transpose_rhs
// FSDP-NEXT: %[[V20:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V15]] transpose_lhs
// FSDP-NEXT: %[[V21:[a-z0-9_]+]] = nn.silu_grad %[[V10]], %[[V19]]
// FSDP-NEXT: %[[V22:[a-z0-9_]+]] = nn.matmul %[[V21]], %[[V18]]#1 transpose_rhs
// FSDP-NEXT: dist.free %[[V17]] : tensor<448xf32>
// FSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.matmul %[[V6]], %[[V21]] transpose_lhs
// FSDP-NEXT: %[[V24:[a-z0-9_]+]] = dist.bucket %[[V20]], %[[V23]] offsets = [0, 48] chunks = 4 : tensor<16x12xf32>, tensor<16x16xf32> -> tensor<448xf32>
// FSDP-NEXT: %[[V25:[a-z0-9_]+]] = dist.reduce_scatter %[[V24]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xf32> -> tensor<112xf32>
// FSDP-NEXT: dist.free %[[V24]] : tensor<448xf32>
// FSDP-NEXT: %[[V26:[a-z0-9_]+]]:2 = dist.unbucket %[[V25]] offsets = [0, 48] : tensor<112xf32> -> tensor<4x12xf32>, tensor<4x16xf32>
// FSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.silu_grad %[[V5]], %[[V22]]
// FSDP-NEXT: %[[V28:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x16xf32>
// FSDP-NEXT: %[[V29:[a-z0-9_]+]] = nn.matmul %[[V27]], %[[V28]] transpose_rhs
// FSDP-NEXT: dist.free %[[V28]] : tensor<16x16xf32>
// FSDP-NEXT: %[[V30:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V27]] transpose_lhs
// FSDP-NEXT: %[[V31:[a-z0-9_]+]] = nn.silu_grad %[[V3]], %[[V29]]
// FSDP-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %arg0, %[[V31]] transpose_lhs
// FSDP-NEXT: %[[V33:[a-z0-9_]+]] = dist.bucket %[[V30]], %[[V32]] offsets = [0, 64] chunks = 4 : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<512xf32>
// FSDP-NEXT: %[[V34:[a-z0-9_]+]] = dist.reduce_scatter %[[V33]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<512xf32> -> tensor<128xf32>
// FSDP-NEXT: dist.free %[[V33]] : tensor<512xf32>
// FSDP-NEXT: %[[V35:[a-z0-9_]+]]:2 = dist.unbucket %[[V34]] offsets = [0, 64] : tensor<128xf32> -> tensor<4x16xf32>, tensor<4x16xf32>
// FSDP-NEXT: return %[[V14]], %[[V35]]#1, %[[V35]]#0, %[[V26]]#1, %[[V26]]#0 : tensor<f32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>
// HSDP-LABEL: func.func @mlp(
// HSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 128] : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<256xf32>
// HSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<256xf32> -> tensor<512xf32>
// HSDP-NEXT: dist.free %[[V0]] : tensor<256xf32>
// HSDP-NEXT: %[[V2:[a-z0-9_]+]]:2 = dist.unbucket %[[V1]] offsets = [0, 128] chunks = 2 : tensor<512xf32> -> tensor<16x16xf32>, tensor<16x16xf32>
// HSDP-NEXT: %[[V3:[a-z0-9_]+]] = nn.linear %arg0, %[[V2]]#0
// HSDP-NEXT: %[[V4:[a-z0-9_]+]] = nn.silu %[[V3]]
// HSDP-NEXT: %[[V5:[a-z0-9_]+]] = nn.linear %[[V4]], %[[V2]]#1
// HSDP-NEXT: dist.free %[[V1]] : tensor<512xf32>
// HSDP-NEXT: %[[V6:[a-z0-9_]+]] = nn.silu %[[V5]]
// HSDP-NEXT: %[[V7:[a-z0-9_]+]] = dist.bucket %arg4, %arg5 offsets = [0, 128] : tensor<8x16xf32>, tensor<8x12xf32> -> tensor<224xf32>
// HSDP-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %[[V7]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<224xf32> -> tensor<448xf32>
// HSDP-NEXT: dist.free %[[V7]] : tensor<224xf32>
// HSDP-NEXT: %[[V9:[a-z0-9_]+]]:2 = dist.unbucket %[[V8]] offsets = [0, 128] chunks = 2 : tensor<448xf32> -> tensor<16x16xf32>, tensor<16x12xf32>
// HSDP-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V6]], %[[V9]]#0
// HSDP-NEXT: %[[V11:[a-z0-9_]+]] = nn.silu %[[V10]]
// HSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V9]]#1
// HSDP-NEXT: dist.free %[[V8]] : tensor<448xf32>
// HSDP-NEXT: %[[V13:[a-z0-9_]+]] = nn.cross_entropy %[[V12]], %arg1
// HSDP-NEXT: %[[V14:[a-z0-9_]+]] = dist.all_reduce %[[V13]] on @mesh axes = ["dp", "fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// HSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V12]], %arg1, %arg6 scale 1.250000e-01
// HSDP-NEXT: %[[V16:[a-z0-9_]+]] = dist.bucket %arg5, %arg4 offsets = [0, 96] : tensor<8x12xf32>, tensor<8x16xf32> -> tensor<224xf32>
// HSDP-NEXT: %[[V17:[a-z0-9_]+]] = dist.all_gather %[[V16]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<224xf32> -> tensor<448xf32>
// HSDP-NEXT: dist.free %[[V16]] : tensor<224xf32>
// HSDP-NEXT: %[[V18:[a-z0-9_]+]]:2 = dist.unbucket %[[V17]] offsets = [0, 96] chunks = 2 : tensor<448xf32> -> tensor<16x12xf32>, tensor<16x16xf32>
// HSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.matmul %[[V15]], %[[V18]]#0 transpose_rhs
// HSDP-NEXT: %[[V20:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V15]] transpose_lhs
// HSDP-NEXT: %[[V21:[a-z0-9_]+]] = nn.silu_grad %[[V10]], %[[V19]]
// HSDP-NEXT: %[[V22:[a-z0-9_]+]] = nn.matmul %[[V21]], %[[V18]]#1 transpose_rhs
// HSDP-NEXT: dist.free %[[V17]] : tensor<448xf32>
// HSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.matmul %[[V6]], %[[V21]] transpose_lhs
// HSDP-NEXT: %[[V24:[a-z0-9_]+]] = dist.bucket %[[V20]], %[[V23]] offsets = [0, 96] chunks = 2 : tensor<16x12xf32>, tensor<16x16xf32> -> tensor<448xf32>
// HSDP-NEXT: %[[V25:[a-z0-9_]+]] = dist.reduce_scatter %[[V24]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xf32> -> tensor<224xf32>
// HSDP-NEXT: dist.free %[[V24]] : tensor<448xf32>
// HSDP-NEXT: %[[V26:[a-z0-9_]+]] = dist.all_reduce %[[V25]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<224xf32> -> tensor<224xf32>
// HSDP-NEXT: %[[V27:[a-z0-9_]+]]:2 = dist.unbucket %[[V26]] offsets = [0, 96] : tensor<224xf32> -> tensor<8x12xf32>, tensor<8x16xf32>
// HSDP-NEXT: %[[V28:[a-z0-9_]+]] = nn.silu_grad %[[V5]], %[[V22]]
// HSDP-NEXT: %[[V29:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// HSDP-NEXT: %[[V30:[a-z0-9_]+]] = nn.matmul %[[V28]], %[[V29]] transpose_rhs
// HSDP-NEXT: dist.free %[[V29]] : tensor<16x16xf32>
// HSDP-NEXT: %[[V31:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V28]] transpose_lhs
// HSDP-NEXT: %[[V32:[a-z0-9_]+]] = nn.silu_grad %[[V3]], %[[V30]]
// HSDP-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %arg0, %[[V32]] transpose_lhs
// HSDP-NEXT: %[[V34:[a-z0-9_]+]] = dist.bucket %[[V31]], %[[V33]] offsets = [0, 128] chunks = 2 : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<512xf32>
// HSDP-NEXT: %[[V35:[a-z0-9_]+]] = dist.reduce_scatter %[[V34]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<512xf32> -> tensor<256xf32>
// HSDP-NEXT: dist.free %[[V34]] : tensor<512xf32>
// HSDP-NEXT: %[[V36:[a-z0-9_]+]] = dist.all_reduce %[[V35]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<256xf32> -> tensor<256xf32>
// HSDP-NEXT: %[[V37:[a-z0-9_]+]]:2 = dist.unbucket %[[V36]] offsets = [0, 128] : tensor<256xf32> -> tensor<8x16xf32>, tensor<8x16xf32>
// HSDP-NEXT: return %[[V14]], %[[V37]]#1, %[[V37]]#0, %[[V27]]#1, %[[V27]]#0 : tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x12xf32>
// FSDPTP-LABEL: func.func @mlp(
// FSDPTP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 64] : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<128xf32>
// FSDPTP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<128xf32> -> tensor<256xf32>
// FSDPTP-NEXT: dist.free %[[V0]] : tensor<128xf32>
// FSDPTP-NEXT: %[[V2:[a-z0-9_]+]]:2 = dist.unbucket %[[V1]] offsets = [0, 64] chunks = 2 split_dims = [0, 1] : tensor<256xf32> -> tensor<16x8xf32>, tensor<8x16xf32>
// FSDPTP-NEXT: %[[V3:[a-z0-9_]+]] = nn.linear %arg0, %[[V2]]#0
// FSDPTP-NEXT: %[[V4:[a-z0-9_]+]] = nn.silu %[[V3]]
// FSDPTP-NEXT: %[[V5:[a-z0-9_]+]] = nn.linear %[[V4]], %[[V2]]#1
// FSDPTP-NEXT: dist.free %[[V1]] : tensor<256xf32>
// FSDPTP-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_reduce %[[V5]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x16xf32> -> tensor<4x16xf32>
// FSDPTP-NEXT: %[[V7:[a-z0-9_]+]] = nn.silu %[[V6]]
// FSDPTP-NEXT: %[[V8:[a-z0-9_]+]] = dist.bucket %arg4, %arg5 offsets = [0, 64] : tensor<8x8xf32>, tensor<8x6xf32> -> tensor<112xf32>
// FSDPTP-NEXT: %[[V9:[a-z0-9_]+]] = dist.all_gather %[[V8]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> tensor<224xf32>
// FSDPTP-NEXT: dist.free %[[V8]] : tensor<112xf32>
// FSDPTP-NEXT: %[[V10:[a-z0-9_]+]]:2 = dist.unbucket %[[V9]] offsets = [0, 64] chunks = 2 split_dims = [0, 1] : tensor<224xf32> -> tensor<16x8xf32>, tensor<8x12xf32>
// FSDPTP-NEXT: %[[V11:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V10]]#0
// FSDPTP-NEXT: %[[V12:[a-z0-9_]+]] = nn.silu %[[V11]]
// FSDPTP-NEXT: %[[V13:[a-z0-9_]+]] = nn.linear %[[V12]], %[[V10]]#1
// FSDPTP-NEXT: dist.free %[[V9]] : tensor<224xf32>
// FSDPTP-NEXT: %[[V14:[a-z0-9_]+]] = dist.all_reduce %[[V13]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x12xf32> -> tensor<4x12xf32>
// FSDPTP-NEXT: %[[V15:[a-z0-9_]+]] = nn.cross_entropy %[[V14]], %arg1
// FSDPTP-NEXT: %[[V16:[a-z0-9_]+]] = dist.all_reduce %[[V15]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// FSDPTP-NEXT: %[[V17:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V14]], %arg1, %arg6 scale 1.250000e-01
// FSDPTP-NEXT: %[[V18:[a-z0-9_]+]] = dist.bucket %arg5, %arg4 offsets = [0, 48] : tensor<8x6xf32>, tensor<8x8xf32> -> tensor<112xf32>
// FSDPTP-NEXT: %[[V19:[a-z0-9_]+]] = dist.all_gather %[[V18]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> tensor<224xf32>
// FSDPTP-NEXT: dist.free %[[V18]] : tensor<112xf32>
// FSDPTP-NEXT: %[[V20:[a-z0-9_]+]]:2 = dist.unbucket %[[V19]] offsets = [0, 48] chunks = 2 split_dims = [1, 0] : tensor<224xf32> -> tensor<8x12xf32>, tensor<16x8xf32>
// FSDPTP-NEXT: %[[V21:[a-z0-9_]+]] = nn.matmul %[[V17]], %[[V20]]#0 transpose_rhs
// FSDPTP-NEXT: %[[V22:[a-z0-9_]+]] = nn.matmul %[[V12]], %[[V17]] transpose_lhs
// FSDPTP-NEXT: %[[V23:[a-z0-9_]+]] = nn.silu_grad %[[V11]], %[[V21]]
// FSDPTP-NEXT: %[[V24:[a-z0-9_]+]] = nn.matmul %[[V23]], %[[V20]]#1 transpose_rhs
// FSDPTP-NEXT: dist.free %[[V19]] : tensor<224xf32>
// FSDPTP-NEXT: %[[V25:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V23]] transpose_lhs
// FSDPTP-NEXT: %[[V26:[a-z0-9_]+]] = dist.bucket %[[V22]], %[[V25]] offsets = [0, 48] chunks = 2 split_dims = [1, 0] : tensor<8x12xf32>, tensor<16x8xf32> -> tensor<224xf32>
// FSDPTP-NEXT: %[[V27:[a-z0-9_]+]] = dist.reduce_scatter %[[V26]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<224xf32> -> tensor<112xf32>
// FSDPTP-NEXT: dist.free %[[V26]] : tensor<224xf32>
// FSDPTP-NEXT: %[[V28:[a-z0-9_]+]]:2 = dist.unbucket %[[V27]] offsets = [0, 48] : tensor<112xf32> -> tensor<8x6xf32>, tensor<8x8xf32>
// FSDPTP-NEXT: %[[V29:[a-z0-9_]+]] = dist.all_reduce %[[V24]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x16xf32> -> tensor<4x16xf32>
// FSDPTP-NEXT: %[[V30:[a-z0-9_]+]] = nn.silu_grad %[[V6]], %[[V29]]
// FSDPTP-NEXT: %[[V31:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<8x8xf32> -> tensor<8x16xf32>
// FSDPTP-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %[[V30]], %[[V31]] transpose_rhs
// FSDPTP-NEXT: dist.free %[[V31]] : tensor<8x16xf32>
// FSDPTP-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V30]] transpose_lhs
// FSDPTP-NEXT: %[[V34:[a-z0-9_]+]] = nn.silu_grad %[[V3]], %[[V32]]
// FSDPTP-NEXT: %[[V35:[a-z0-9_]+]] = nn.matmul %arg0, %[[V34]] transpose_lhs
// FSDPTP-NEXT: %[[V36:[a-z0-9_]+]] = dist.bucket %[[V33]], %[[V35]] offsets = [0, 64] chunks = 2 split_dims = [1, 0] : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<256xf32>
// FSDPTP-NEXT: %[[V37:[a-z0-9_]+]] = dist.reduce_scatter %[[V36]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<256xf32> -> tensor<128xf32>
// FSDPTP-NEXT: dist.free %[[V36]] : tensor<256xf32>
// FSDPTP-NEXT: %[[V38:[a-z0-9_]+]]:2 = dist.unbucket %[[V37]] offsets = [0, 64] : tensor<128xf32> -> tensor<8x8xf32>, tensor<8x8xf32>
// FSDPTP-NEXT: return %[[V16]], %[[V38]]#1, %[[V38]]#0, %[[V28]]#1, %[[V28]]#0 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x6xf32>
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0a: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w0b: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc2.weight"},
    %w1a: tensor<16x16xf32> {nn.param, nn.name = "layers.1.fc1.weight"},
    %w1b: tensor<16x12xf32> {nn.param, nn.name = "layers.1.fc2.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a0 = nn.silu %h0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h1 = nn.linear %a0, %w0b : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a1 = nn.silu %h1 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h2 = nn.linear %a1, %w1a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a2 = nn.silu %h2 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a2, %w1b : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the exact collective sequence of one Llama block: units "root"
// (embedding, final norm, head) and "layers.0".
// FSDP-LABEL: func.func @llama(
// FSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg12, %arg13 offsets = [0, 128, 132] : tensor<8x16xf32>, tensor<4xf32>, tensor<4x32xf32> -> tensor<260xf32>
// FSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<260xf32> -> tensor<1040xf32>
// FSDP-NEXT: dist.free %[[V0]] : tensor<260xf32>
// FSDP-NEXT: %[[V2:[a-z0-9_]+]]:3 = dist.unbucket %[[V1]] offsets = [0, 128, 132] chunks = 4 : tensor<1040xf32> -> tensor<32x16xf32>, tensor<16xf32>, tensor<16x32xf32>
// FSDP-NEXT: %[[V3:[a-z0-9_]+]] = nn.embedding %arg0, %[[V2]]#0
// FSDP-NEXT: %[[V4:[a-z0-9_]+]] = dist.bucket %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11 offsets = [0, 4, 68, 100, 132, 196, 200, 296, 392] : tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<6x16xf32> -> tensor<488xf32>
// FSDP-NEXT: %[[V5:[a-z0-9_]+]] = dist.all_gather %[[V4]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<488xf32> -> tensor<1952xf32>
// FSDP-NEXT: dist.free %[[V4]] : tensor<488xf32>
// FSDP-NEXT: %[[V6:[a-z0-9_]+]]:9 = dist.unbucket %[[V5]] offsets = [0, 4, 68, 100, 132, 196, 200, 296, 392] chunks = 4 : tensor<1952xf32> -> tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<24x16xf32>
// FSDP-NEXT: %[[V7:[a-z0-9_]+]] = nn.rms_norm %[[V3]], %[[V6]]#0 epsilon 1.000000e-05
// FSDP-NEXT: %[[V8:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V6]]#1
// FSDP-NEXT: %[[V9:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V6]]#2
// FSDP-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V6]]#3
// FSDP-NEXT: %[[V11:[a-z0-9_]+]] = nn.reshape %[[V8]]
// FSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.reshape %[[V9]]
// FSDP-NEXT: %[[V13:[a-z0-9_]+]] = nn.reshape %[[V10]]
// FSDP-NEXT: %[[V14:[a-z0-9_]+]] = nn.rope %[[V11]] theta 1.000000e+04
// FSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.rope %[[V12]] theta 1.000000e+04
// FSDP-NEXT: %[[V16:[a-z0-9_]+]] = nn.attention %[[V14]], %[[V15]], %[[V13]]
// FSDP-NEXT: %[[V17:[a-z0-9_]+]] = nn.reshape %[[V16]]
// FSDP-NEXT: %[[V18:[a-z0-9_]+]] = nn.linear %[[V17]], %[[V6]]#4
// FSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.add %[[V3]], %[[V18]]
// FSDP-NEXT: %[[V20:[a-z0-9_]+]] = nn.rms_norm %[[V19]], %[[V6]]#5 epsilon 1.000000e-05
// FSDP-NEXT: %[[V21:[a-z0-9_]+]] = nn.linear %[[V20]], %[[V6]]#6
// FSDP-NEXT: %[[V22:[a-z0-9_]+]] = nn.linear %[[V20]], %[[V6]]#7
// FSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.silu %[[V21]]
// FSDP-NEXT: %[[V24:[a-z0-9_]+]] = nn.mul %[[V23]], %[[V22]]
// FSDP-NEXT: %[[V25:[a-z0-9_]+]] = nn.linear %[[V24]], %[[V6]]#8
// FSDP-NEXT: dist.free %[[V5]] : tensor<1952xf32>
// FSDP-NEXT: %[[V26:[a-z0-9_]+]] = nn.add %[[V19]], %[[V25]]
// FSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.rms_norm %[[V26]], %[[V2]]#1 epsilon 1.000000e-05
// FSDP-NEXT: %[[V28:[a-z0-9_]+]] = nn.linear %[[V27]], %[[V2]]#2
// FSDP-NEXT: dist.free %[[V1]] : tensor<1040xf32>
// FSDP-NEXT: %[[V29:[a-z0-9_]+]] = nn.cross_entropy %[[V28]], %arg1
// FSDP-NEXT: %[[V30:[a-z0-9_]+]] = dist.all_reduce %[[V29]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// FSDP-NEXT: %[[V31:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V28]], %arg1, %arg14 scale 3.125000e-02
// FSDP-NEXT: %[[V32:[a-z0-9_]+]] = dist.bucket %arg13, %arg12 offsets = [0, 128] : tensor<4x32xf32>, tensor<4xf32> -> tensor<132xf32>
// FSDP-NEXT: %[[V33:[a-z0-9_]+]] = dist.all_gather %[[V32]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<132xf32> -> tensor<528xf32>
// FSDP-NEXT: dist.free %[[V32]] : tensor<132xf32>
// FSDP-NEXT: %[[V34:[a-z0-9_]+]]:2 = dist.unbucket %[[V33]] offsets = [0, 128] chunks = 4 : tensor<528xf32> -> tensor<16x32xf32>, tensor<16xf32>
// FSDP-NEXT: %[[V35:[a-z0-9_]+]] = nn.matmul %[[V31]], %[[V34]]#0 transpose_rhs
// FSDP-NEXT: %[[V36:[a-z0-9_]+]] = nn.matmul %[[V27]], %[[V31]] transpose_lhs
// FSDP-NEXT: %[[V37:[a-z0-9_]+]], %[[V38:[a-z0-9_]+]] = nn.rms_norm_grad %[[V26]], %[[V34]]#1, %[[V35]] epsilon 1.000000e-05
// FSDP-NEXT: dist.free %[[V33]] : tensor<528xf32>
// FSDP-NEXT: %[[V39:[a-z0-9_]+]] = dist.bucket %arg11, %arg10, %arg9, %arg8, %arg7, %arg6, %arg5, %arg4, %arg3 offsets = [0, 96, 192, 288, 292, 356, 388, 420, 484] : tensor<6x16xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32> -> tensor<488xf32>
// FSDP-NEXT: %[[V40:[a-z0-9_]+]] = dist.all_gather %[[V39]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<488xf32> -> tensor<1952xf32>
// FSDP-NEXT: dist.free %[[V39]] : tensor<488xf32>
// FSDP-NEXT: %[[V41:[a-z0-9_]+]]:9 = dist.unbucket %[[V40]] offsets = [0, 96, 192, 288, 292, 356, 388, 420, 484] chunks = 4 : tensor<1952xf32> -> tensor<24x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32>
// FSDP-NEXT: %[[V42:[a-z0-9_]+]] = nn.matmul %[[V37]], %[[V41]]#0 transpose_rhs
// FSDP-NEXT: %[[V43:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V37]] transpose_lhs
// FSDP-NEXT: %[[V44:[a-z0-9_]+]] = nn.mul %[[V42]], %[[V22]]
// FSDP-NEXT: %[[V45:[a-z0-9_]+]] = nn.mul %[[V42]], %[[V23]]
// FSDP-NEXT: %[[V46:[a-z0-9_]+]] = nn.silu_grad %[[V21]], %[[V44]]
// FSDP-NEXT: %[[V47:[a-z0-9_]+]] = nn.matmul %[[V45]], %[[V41]]#1 transpose_rhs
// FSDP-NEXT: %[[V48:[a-z0-9_]+]] = nn.matmul %[[V20]], %[[V45]] transpose_lhs
// FSDP-NEXT: %[[V49:[a-z0-9_]+]] = nn.matmul %[[V46]], %[[V41]]#2 transpose_rhs
// FSDP-NEXT: %[[V50:[a-z0-9_]+]] = nn.matmul %[[V20]], %[[V46]] transpose_lhs
// FSDP-NEXT: %[[V51:[a-z0-9_]+]] = nn.add %[[V47]], %[[V49]]
// FSDP-NEXT: %[[V52:[a-z0-9_]+]], %[[V53:[a-z0-9_]+]] = nn.rms_norm_grad %[[V19]], %[[V41]]#3, %[[V51]] epsilon 1.000000e-05
// FSDP-NEXT: %[[V54:[a-z0-9_]+]] = nn.add %[[V37]], %[[V52]]
// FSDP-NEXT: %[[V55:[a-z0-9_]+]] = nn.matmul %[[V54]], %[[V41]]#4 transpose_rhs
// FSDP-NEXT: %[[V56:[a-z0-9_]+]] = nn.matmul %[[V17]], %[[V54]] transpose_lhs
// FSDP-NEXT: %[[V57:[a-z0-9_]+]] = nn.reshape %[[V55]]
// FSDP-NEXT: %[[V58:[a-z0-9_]+]], %[[V59:[a-z0-9_]+]], %[[V60:[a-z0-9_]+]] = nn.attention_grad %[[V14]], %[[V15]], %[[V13]], %[[V57]]
// FSDP-NEXT: %[[V61:[a-z0-9_]+]] = nn.rope %[[V59]] theta 1.000000e+04 inverse
// FSDP-NEXT: %[[V62:[a-z0-9_]+]] = nn.rope %[[V58]] theta 1.000000e+04 inverse
// FSDP-NEXT: %[[V63:[a-z0-9_]+]] = nn.reshape %[[V60]]
// FSDP-NEXT: %[[V64:[a-z0-9_]+]] = nn.reshape %[[V61]]
// FSDP-NEXT: %[[V65:[a-z0-9_]+]] = nn.reshape %[[V62]]
// FSDP-NEXT: %[[V66:[a-z0-9_]+]] = nn.matmul %[[V63]], %[[V41]]#5 transpose_rhs
// FSDP-NEXT: %[[V67:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V63]] transpose_lhs
// FSDP-NEXT: %[[V68:[a-z0-9_]+]] = nn.matmul %[[V64]], %[[V41]]#6 transpose_rhs
// FSDP-NEXT: %[[V69:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V64]] transpose_lhs
// FSDP-NEXT: %[[V70:[a-z0-9_]+]] = nn.add %[[V66]], %[[V68]]
// FSDP-NEXT: %[[V71:[a-z0-9_]+]] = nn.matmul %[[V65]], %[[V41]]#7 transpose_rhs
// FSDP-NEXT: %[[V72:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V65]] transpose_lhs
// FSDP-NEXT: %[[V73:[a-z0-9_]+]] = nn.add %[[V70]], %[[V71]]
// FSDP-NEXT: %[[V74:[a-z0-9_]+]], %[[V75:[a-z0-9_]+]] = nn.rms_norm_grad %[[V3]], %[[V41]]#8, %[[V73]] epsilon 1.000000e-05
// FSDP-NEXT: dist.free %[[V40]] : tensor<1952xf32>
// FSDP-NEXT: %[[V76:[a-z0-9_]+]] = dist.bucket %[[V43]], %[[V48]], %[[V50]], %[[V53]], %[[V56]], %[[V67]], %[[V69]], %[[V72]], %[[V75]] offsets = [0, 96, 192, 288, 292, 356, 388, 420, 484] chunks = 4 : tensor<24x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32> -> tensor<1952xf32>
// FSDP-NEXT: %[[V77:[a-z0-9_]+]] = dist.reduce_scatter %[[V76]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<1952xf32> -> tensor<488xf32>
// FSDP-NEXT: dist.free %[[V76]] : tensor<1952xf32>
// FSDP-NEXT: %[[V78:[a-z0-9_]+]]:9 = dist.unbucket %[[V77]] offsets = [0, 96, 192, 288, 292, 356, 388, 420, 484] : tensor<488xf32> -> tensor<6x16xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32>
// FSDP-NEXT: %[[V79:[a-z0-9_]+]] = nn.add %[[V54]], %[[V74]]
// FSDP-NEXT: %[[V80:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V79]]
// FSDP-NEXT: %[[V81:[a-z0-9_]+]] = dist.bucket %[[V36]], %[[V38]], %[[V80]] offsets = [0, 128, 132] chunks = 4 : tensor<16x32xf32>, tensor<16xf32>, tensor<32x16xf32> -> tensor<1040xf32>
// FSDP-NEXT: %[[V82:[a-z0-9_]+]] = dist.reduce_scatter %[[V81]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<1040xf32> -> tensor<260xf32>
// FSDP-NEXT: dist.free %[[V81]] : tensor<1040xf32>
// FSDP-NEXT: %[[V83:[a-z0-9_]+]]:3 = dist.unbucket %[[V82]] offsets = [0, 128, 132] : tensor<260xf32> -> tensor<4x32xf32>, tensor<4xf32>, tensor<8x16xf32>
// FSDP-NEXT: return %[[V30]], %[[V83]]#2, %[[V78]]#8, %[[V78]]#7, %[[V78]]#6, %[[V78]]#5, %[[V78]]#4, %[[V78]]#3, %[[V78]]#2, %[[V78]]#1, %[[V78]]#0, %[[V83]]#1, %[[V83]]#0 : tensor<f32>, tensor<8x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<6x16xf32>, tensor<4xf32>, tensor<4x32xf32>
// HSDP-LABEL: func.func @llama(
// HSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg12, %arg13 offsets = [0, 256, 264] : tensor<16x16xf32>, tensor<8xf32>, tensor<8x32xf32> -> tensor<520xf32>
// HSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<520xf32> -> tensor<1040xf32>
// HSDP-NEXT: dist.free %[[V0]] : tensor<520xf32>
// HSDP-NEXT: %[[V2:[a-z0-9_]+]]:3 = dist.unbucket %[[V1]] offsets = [0, 256, 264] chunks = 2 : tensor<1040xf32> -> tensor<32x16xf32>, tensor<16xf32>, tensor<16x32xf32>
// HSDP-NEXT: %[[V3:[a-z0-9_]+]] = nn.embedding %arg0, %[[V2]]#0
// HSDP-NEXT: %[[V4:[a-z0-9_]+]] = dist.bucket %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11 offsets = [0, 8, 136, 200, 264, 392, 400, 592, 784] : tensor<8xf32>, tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<12x16xf32> -> tensor<976xf32>
// HSDP-NEXT: %[[V5:[a-z0-9_]+]] = dist.all_gather %[[V4]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<976xf32> -> tensor<1952xf32>
// HSDP-NEXT: dist.free %[[V4]] : tensor<976xf32>
// HSDP-NEXT: %[[V6:[a-z0-9_]+]]:9 = dist.unbucket %[[V5]] offsets = [0, 8, 136, 200, 264, 392, 400, 592, 784] chunks = 2 : tensor<1952xf32> -> tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<24x16xf32>
// HSDP-NEXT: %[[V7:[a-z0-9_]+]] = nn.rms_norm %[[V3]], %[[V6]]#0 epsilon 1.000000e-05
// HSDP-NEXT: %[[V8:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V6]]#1
// HSDP-NEXT: %[[V9:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V6]]#2
// HSDP-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V6]]#3
// HSDP-NEXT: %[[V11:[a-z0-9_]+]] = nn.reshape %[[V8]]
// HSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.reshape %[[V9]]
// HSDP-NEXT: %[[V13:[a-z0-9_]+]] = nn.reshape %[[V10]]
// HSDP-NEXT: %[[V14:[a-z0-9_]+]] = nn.rope %[[V11]] theta 1.000000e+04
// HSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.rope %[[V12]] theta 1.000000e+04
// HSDP-NEXT: %[[V16:[a-z0-9_]+]] = nn.attention %[[V14]], %[[V15]], %[[V13]]
// HSDP-NEXT: %[[V17:[a-z0-9_]+]] = nn.reshape %[[V16]]
// HSDP-NEXT: %[[V18:[a-z0-9_]+]] = nn.linear %[[V17]], %[[V6]]#4
// HSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.add %[[V3]], %[[V18]]
// HSDP-NEXT: %[[V20:[a-z0-9_]+]] = nn.rms_norm %[[V19]], %[[V6]]#5 epsilon 1.000000e-05
// HSDP-NEXT: %[[V21:[a-z0-9_]+]] = nn.linear %[[V20]], %[[V6]]#6
// HSDP-NEXT: %[[V22:[a-z0-9_]+]] = nn.linear %[[V20]], %[[V6]]#7
// HSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.silu %[[V21]]
// HSDP-NEXT: %[[V24:[a-z0-9_]+]] = nn.mul %[[V23]], %[[V22]]
// HSDP-NEXT: %[[V25:[a-z0-9_]+]] = nn.linear %[[V24]], %[[V6]]#8
// HSDP-NEXT: dist.free %[[V5]] : tensor<1952xf32>
// HSDP-NEXT: %[[V26:[a-z0-9_]+]] = nn.add %[[V19]], %[[V25]]
// HSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.rms_norm %[[V26]], %[[V2]]#1 epsilon 1.000000e-05
// HSDP-NEXT: %[[V28:[a-z0-9_]+]] = nn.linear %[[V27]], %[[V2]]#2
// HSDP-NEXT: dist.free %[[V1]] : tensor<1040xf32>
// HSDP-NEXT: %[[V29:[a-z0-9_]+]] = nn.cross_entropy %[[V28]], %arg1
// HSDP-NEXT: %[[V30:[a-z0-9_]+]] = dist.all_reduce %[[V29]] on @mesh axes = ["dp", "fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// HSDP-NEXT: %[[V31:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V28]], %arg1, %arg14 scale 3.125000e-02
// HSDP-NEXT: %[[V32:[a-z0-9_]+]] = dist.bucket %arg13, %arg12 offsets = [0, 256] : tensor<8x32xf32>, tensor<8xf32> -> tensor<264xf32>
// HSDP-NEXT: %[[V33:[a-z0-9_]+]] = dist.all_gather %[[V32]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<264xf32> -> tensor<528xf32>
// HSDP-NEXT: dist.free %[[V32]] : tensor<264xf32>
// HSDP-NEXT: %[[V34:[a-z0-9_]+]]:2 = dist.unbucket %[[V33]] offsets = [0, 256] chunks = 2 : tensor<528xf32> -> tensor<16x32xf32>, tensor<16xf32>
// HSDP-NEXT: %[[V35:[a-z0-9_]+]] = nn.matmul %[[V31]], %[[V34]]#0 transpose_rhs
// HSDP-NEXT: %[[V36:[a-z0-9_]+]] = nn.matmul %[[V27]], %[[V31]] transpose_lhs
// HSDP-NEXT: %[[V37:[a-z0-9_]+]], %[[V38:[a-z0-9_]+]] = nn.rms_norm_grad %[[V26]], %[[V34]]#1, %[[V35]] epsilon 1.000000e-05
// HSDP-NEXT: dist.free %[[V33]] : tensor<528xf32>
// HSDP-NEXT: %[[V39:[a-z0-9_]+]] = dist.bucket %arg11, %arg10, %arg9, %arg8, %arg7, %arg6, %arg5, %arg4, %arg3 offsets = [0, 192, 384, 576, 584, 712, 776, 840, 968] : tensor<12x16xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32> -> tensor<976xf32>
// HSDP-NEXT: %[[V40:[a-z0-9_]+]] = dist.all_gather %[[V39]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<976xf32> -> tensor<1952xf32>
// HSDP-NEXT: dist.free %[[V39]] : tensor<976xf32>
// HSDP-NEXT: %[[V41:[a-z0-9_]+]]:9 = dist.unbucket %[[V40]] offsets = [0, 192, 384, 576, 584, 712, 776, 840, 968] chunks = 2 : tensor<1952xf32> -> tensor<24x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32>
// HSDP-NEXT: %[[V42:[a-z0-9_]+]] = nn.matmul %[[V37]], %[[V41]]#0 transpose_rhs
// HSDP-NEXT: %[[V43:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V37]] transpose_lhs
// HSDP-NEXT: %[[V44:[a-z0-9_]+]] = nn.mul %[[V42]], %[[V22]]
// HSDP-NEXT: %[[V45:[a-z0-9_]+]] = nn.mul %[[V42]], %[[V23]]
// HSDP-NEXT: %[[V46:[a-z0-9_]+]] = nn.silu_grad %[[V21]], %[[V44]]
// HSDP-NEXT: %[[V47:[a-z0-9_]+]] = nn.matmul %[[V45]], %[[V41]]#1 transpose_rhs
// HSDP-NEXT: %[[V48:[a-z0-9_]+]] = nn.matmul %[[V20]], %[[V45]] transpose_lhs
// HSDP-NEXT: %[[V49:[a-z0-9_]+]] = nn.matmul %[[V46]], %[[V41]]#2 transpose_rhs
// HSDP-NEXT: %[[V50:[a-z0-9_]+]] = nn.matmul %[[V20]], %[[V46]] transpose_lhs
// HSDP-NEXT: %[[V51:[a-z0-9_]+]] = nn.add %[[V47]], %[[V49]]
// HSDP-NEXT: %[[V52:[a-z0-9_]+]], %[[V53:[a-z0-9_]+]] = nn.rms_norm_grad %[[V19]], %[[V41]]#3, %[[V51]] epsilon 1.000000e-05
// HSDP-NEXT: %[[V54:[a-z0-9_]+]] = nn.add %[[V37]], %[[V52]]
// HSDP-NEXT: %[[V55:[a-z0-9_]+]] = nn.matmul %[[V54]], %[[V41]]#4 transpose_rhs
// HSDP-NEXT: %[[V56:[a-z0-9_]+]] = nn.matmul %[[V17]], %[[V54]] transpose_lhs
// HSDP-NEXT: %[[V57:[a-z0-9_]+]] = nn.reshape %[[V55]]
// HSDP-NEXT: %[[V58:[a-z0-9_]+]], %[[V59:[a-z0-9_]+]], %[[V60:[a-z0-9_]+]] = nn.attention_grad %[[V14]], %[[V15]], %[[V13]], %[[V57]]
// HSDP-NEXT: %[[V61:[a-z0-9_]+]] = nn.rope %[[V59]] theta 1.000000e+04 inverse
// HSDP-NEXT: %[[V62:[a-z0-9_]+]] = nn.rope %[[V58]] theta 1.000000e+04 inverse
// HSDP-NEXT: %[[V63:[a-z0-9_]+]] = nn.reshape %[[V60]]
// HSDP-NEXT: %[[V64:[a-z0-9_]+]] = nn.reshape %[[V61]]
// HSDP-NEXT: %[[V65:[a-z0-9_]+]] = nn.reshape %[[V62]]
// HSDP-NEXT: %[[V66:[a-z0-9_]+]] = nn.matmul %[[V63]], %[[V41]]#5 transpose_rhs
// HSDP-NEXT: %[[V67:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V63]] transpose_lhs
// HSDP-NEXT: %[[V68:[a-z0-9_]+]] = nn.matmul %[[V64]], %[[V41]]#6 transpose_rhs
// HSDP-NEXT: %[[V69:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V64]] transpose_lhs
// HSDP-NEXT: %[[V70:[a-z0-9_]+]] = nn.add %[[V66]], %[[V68]]
// HSDP-NEXT: %[[V71:[a-z0-9_]+]] = nn.matmul %[[V65]], %[[V41]]#7 transpose_rhs
// HSDP-NEXT: %[[V72:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V65]] transpose_lhs
// HSDP-NEXT: %[[V73:[a-z0-9_]+]] = nn.add %[[V70]], %[[V71]]
// HSDP-NEXT: %[[V74:[a-z0-9_]+]], %[[V75:[a-z0-9_]+]] = nn.rms_norm_grad %[[V3]], %[[V41]]#8, %[[V73]] epsilon 1.000000e-05
// HSDP-NEXT: dist.free %[[V40]] : tensor<1952xf32>
// HSDP-NEXT: %[[V76:[a-z0-9_]+]] = dist.bucket %[[V43]], %[[V48]], %[[V50]], %[[V53]], %[[V56]], %[[V67]], %[[V69]], %[[V72]], %[[V75]] offsets = [0, 192, 384, 576, 584, 712, 776, 840, 968] chunks = 2 : tensor<24x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32> -> tensor<1952xf32>
// HSDP-NEXT: %[[V77:[a-z0-9_]+]] = dist.reduce_scatter %[[V76]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<1952xf32> -> tensor<976xf32>
// HSDP-NEXT: dist.free %[[V76]] : tensor<1952xf32>
// HSDP-NEXT: %[[V78:[a-z0-9_]+]] = dist.all_reduce %[[V77]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<976xf32> -> tensor<976xf32>
// HSDP-NEXT: %[[V79:[a-z0-9_]+]]:9 = dist.unbucket %[[V78]] offsets = [0, 192, 384, 576, 584, 712, 776, 840, 968] : tensor<976xf32> -> tensor<12x16xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32>
// HSDP-NEXT: %[[V80:[a-z0-9_]+]] = nn.add %[[V54]], %[[V74]]
// HSDP-NEXT: %[[V81:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V80]]
// HSDP-NEXT: %[[V82:[a-z0-9_]+]] = dist.bucket %[[V36]], %[[V38]], %[[V81]] offsets = [0, 256, 264] chunks = 2 : tensor<16x32xf32>, tensor<16xf32>, tensor<32x16xf32> -> tensor<1040xf32>
// HSDP-NEXT: %[[V83:[a-z0-9_]+]] = dist.reduce_scatter %[[V82]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<1040xf32> -> tensor<520xf32>
// HSDP-NEXT: dist.free %[[V82]] : tensor<1040xf32>
// HSDP-NEXT: %[[V84:[a-z0-9_]+]] = dist.all_reduce %[[V83]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<520xf32> -> tensor<520xf32>
// HSDP-NEXT: %[[V85:[a-z0-9_]+]]:3 = dist.unbucket %[[V84]] offsets = [0, 256, 264] : tensor<520xf32> -> tensor<8x32xf32>, tensor<8xf32>, tensor<16x16xf32>
// HSDP-NEXT: return %[[V30]], %[[V85]]#2, %[[V79]]#8, %[[V79]]#7, %[[V79]]#6, %[[V79]]#5, %[[V79]]#4, %[[V79]]#3, %[[V79]]#2, %[[V79]]#1, %[[V79]]#0, %[[V85]]#1, %[[V85]]#0 : tensor<f32>, tensor<16x16xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<12x16xf32>, tensor<8xf32>, tensor<8x32xf32>
// FSDPTP-LABEL: func.func @llama(
// FSDPTP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg12, %arg13 offsets = [0, 128, 136] : tensor<16x8xf32>, tensor<8xf32>, tensor<8x16xf32> -> tensor<264xf32>
// FSDPTP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<264xf32> -> tensor<528xf32>
// FSDPTP-NEXT: dist.free %[[V0]] : tensor<264xf32>
// FSDPTP-NEXT: %[[V2:[a-z0-9_]+]]:3 = dist.unbucket %[[V1]] offsets = [0, 128, 136] chunks = 2 split_dims = [1, 0, 0] : tensor<528xf32> -> tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>
// FSDPTP-NEXT: %[[V3:[a-z0-9_]+]] = nn.embedding %arg0, %[[V2]]#0
// FSDPTP-NEXT: %[[V4:[a-z0-9_]+]] = dist.all_reduce %[[V3]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// FSDPTP-NEXT: %[[V5:[a-z0-9_]+]] = dist.bucket %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11 offsets = [0, 8, 72, 104, 136, 200, 208, 304, 400] : tensor<8xf32>, tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x12xf32>, tensor<8x12xf32>, tensor<12x8xf32> -> tensor<496xf32>
// FSDPTP-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_gather %[[V5]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<496xf32> -> tensor<992xf32>
// FSDPTP-NEXT: dist.free %[[V5]] : tensor<496xf32>
// FSDPTP-NEXT: %[[V7:[a-z0-9_]+]]:9 = dist.unbucket %[[V6]] offsets = [0, 8, 72, 104, 136, 200, 208, 304, 400] chunks = 2 split_dims = [0, 0, 0, 0, 1, 0, 0, 0, 1] : tensor<992xf32> -> tensor<16xf32>, tensor<16x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x12xf32>, tensor<16x12xf32>, tensor<12x16xf32>
// FSDPTP-NEXT: %[[V8:[a-z0-9_]+]] = nn.rms_norm %[[V4]], %[[V7]]#0 epsilon 1.000000e-05
// FSDPTP-NEXT: %[[V9:[a-z0-9_]+]] = nn.linear %[[V8]], %[[V7]]#1
// FSDPTP-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V8]], %[[V7]]#2
// FSDPTP-NEXT: %[[V11:[a-z0-9_]+]] = nn.linear %[[V8]], %[[V7]]#3
// FSDPTP-NEXT: %[[V12:[a-z0-9_]+]] = nn.reshape %[[V9]]
// FSDPTP-NEXT: %[[V13:[a-z0-9_]+]] = nn.reshape %[[V10]]
// FSDPTP-NEXT: %[[V14:[a-z0-9_]+]] = nn.reshape %[[V11]]
// FSDPTP-NEXT: %[[V15:[a-z0-9_]+]] = nn.rope %[[V12]] theta 1.000000e+04
// FSDPTP-NEXT: %[[V16:[a-z0-9_]+]] = nn.rope %[[V13]] theta 1.000000e+04
// FSDPTP-NEXT: %[[V17:[a-z0-9_]+]] = nn.attention %[[V15]], %[[V16]], %[[V14]]
// FSDPTP-NEXT: %[[V18:[a-z0-9_]+]] = nn.reshape %[[V17]]
// FSDPTP-NEXT: %[[V19:[a-z0-9_]+]] = nn.linear %[[V18]], %[[V7]]#4
// FSDPTP-NEXT: %[[V20:[a-z0-9_]+]] = nn.add %[[V3]], %[[V19]]
// FSDPTP-NEXT: %[[V21:[a-z0-9_]+]] = dist.all_reduce %[[V20]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// FSDPTP-NEXT: %[[V22:[a-z0-9_]+]] = nn.rms_norm %[[V21]], %[[V7]]#5 epsilon 1.000000e-05
// FSDPTP-NEXT: %[[V23:[a-z0-9_]+]] = nn.linear %[[V22]], %[[V7]]#6
// FSDPTP-NEXT: %[[V24:[a-z0-9_]+]] = nn.linear %[[V22]], %[[V7]]#7
// FSDPTP-NEXT: %[[V25:[a-z0-9_]+]] = nn.silu %[[V23]]
// FSDPTP-NEXT: %[[V26:[a-z0-9_]+]] = nn.mul %[[V25]], %[[V24]]
// FSDPTP-NEXT: %[[V27:[a-z0-9_]+]] = nn.linear %[[V26]], %[[V7]]#8
// FSDPTP-NEXT: dist.free %[[V6]] : tensor<992xf32>
// FSDPTP-NEXT: %[[V28:[a-z0-9_]+]] = nn.add %[[V20]], %[[V27]]
// FSDPTP-NEXT: %[[V29:[a-z0-9_]+]] = dist.all_reduce %[[V28]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// FSDPTP-NEXT: %[[V30:[a-z0-9_]+]] = nn.rms_norm %[[V29]], %[[V2]]#1 epsilon 1.000000e-05
// FSDPTP-NEXT: %[[V31:[a-z0-9_]+]] = nn.linear %[[V30]], %[[V2]]#2
// FSDPTP-NEXT: dist.free %[[V1]] : tensor<528xf32>
// FSDPTP-NEXT: %[[V32:[a-z0-9_]+]] = nn.vocab_max %[[V31]] vocab 32
// FSDPTP-NEXT: %[[V33:[a-z0-9_]+]] = dist.all_reduce %[[V32]] on @mesh axes = ["tp"] reduction = max wire = f32 accum = f32 : tensor<2x8xf32> -> tensor<2x8xf32>
// FSDPTP-NEXT: %[[V34:[a-z0-9_]+]] = nn.vocab_stats %[[V31]], %arg1, %[[V33]] vocab 32
// FSDPTP-NEXT: %[[V35:[a-z0-9_]+]] = dist.all_reduce %[[V34]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x2xf32> -> tensor<2x8x2xf32>
// FSDPTP-NEXT: %[[V36:[a-z0-9_]+]] = nn.vocab_cross_entropy %[[V35]]
// FSDPTP-NEXT: %[[V37:[a-z0-9_]+]] = dist.all_reduce %[[V36]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// FSDPTP-NEXT: %[[V38:[a-z0-9_]+]] = nn.vocab_cross_entropy_grad %[[V31]], %arg1, %[[V33]], %[[V35]], %arg14 scale 3.125000e-02 vocab 32
// FSDPTP-NEXT: %[[V39:[a-z0-9_]+]] = dist.bucket %arg13, %arg12 offsets = [0, 128] : tensor<8x16xf32>, tensor<8xf32> -> tensor<136xf32>
// FSDPTP-NEXT: %[[V40:[a-z0-9_]+]] = dist.all_gather %[[V39]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<136xf32> -> tensor<272xf32>
// FSDPTP-NEXT: dist.free %[[V39]] : tensor<136xf32>
// FSDPTP-NEXT: %[[V41:[a-z0-9_]+]]:2 = dist.unbucket %[[V40]] offsets = [0, 128] chunks = 2 : tensor<272xf32> -> tensor<16x16xf32>, tensor<16xf32>
// FSDPTP-NEXT: %[[V42:[a-z0-9_]+]] = nn.matmul %[[V38]], %[[V41]]#0 transpose_rhs
// FSDPTP-NEXT: %[[V43:[a-z0-9_]+]] = nn.matmul %[[V30]], %[[V38]] transpose_lhs
// FSDPTP-NEXT: %[[V44:[a-z0-9_]+]] = dist.all_reduce %[[V42]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// FSDPTP-NEXT: %[[V45:[a-z0-9_]+]], %[[V46:[a-z0-9_]+]] = nn.rms_norm_grad %[[V29]], %[[V41]]#1, %[[V44]] epsilon 1.000000e-05
// FSDPTP-NEXT: dist.free %[[V40]] : tensor<272xf32>
// FSDPTP-NEXT: %[[V47:[a-z0-9_]+]] = dist.bucket %arg11, %arg10, %arg9, %arg8, %arg7, %arg6, %arg5, %arg4, %arg3 offsets = [0, 96, 192, 288, 296, 360, 392, 424, 488] : tensor<12x8xf32>, tensor<8x12xf32>, tensor<8x12xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32> -> tensor<496xf32>
// FSDPTP-NEXT: %[[V48:[a-z0-9_]+]] = dist.all_gather %[[V47]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<496xf32> -> tensor<992xf32>
// FSDPTP-NEXT: dist.free %[[V47]] : tensor<496xf32>
// FSDPTP-NEXT: %[[V49:[a-z0-9_]+]]:9 = dist.unbucket %[[V48]] offsets = [0, 96, 192, 288, 296, 360, 392, 424, 488] chunks = 2 split_dims = [1, 0, 0, 0, 1, 0, 0, 0, 0] : tensor<992xf32> -> tensor<12x16xf32>, tensor<16x12xf32>, tensor<16x12xf32>, tensor<16xf32>, tensor<8x16xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x8xf32>, tensor<16xf32>
// FSDPTP-NEXT: %[[V50:[a-z0-9_]+]] = nn.matmul %[[V45]], %[[V49]]#0 transpose_rhs
// FSDPTP-NEXT: %[[V51:[a-z0-9_]+]] = nn.matmul %[[V26]], %[[V45]] transpose_lhs
// FSDPTP-NEXT: %[[V52:[a-z0-9_]+]] = nn.mul %[[V50]], %[[V24]]
// FSDPTP-NEXT: %[[V53:[a-z0-9_]+]] = nn.mul %[[V50]], %[[V25]]
// FSDPTP-NEXT: %[[V54:[a-z0-9_]+]] = nn.silu_grad %[[V23]], %[[V52]]
// FSDPTP-NEXT: %[[V55:[a-z0-9_]+]] = nn.matmul %[[V53]], %[[V49]]#1 transpose_rhs
// FSDPTP-NEXT: %[[V56:[a-z0-9_]+]] = nn.matmul %[[V22]], %[[V53]] transpose_lhs
// FSDPTP-NEXT: %[[V57:[a-z0-9_]+]] = nn.matmul %[[V54]], %[[V49]]#2 transpose_rhs
// FSDPTP-NEXT: %[[V58:[a-z0-9_]+]] = nn.matmul %[[V22]], %[[V54]] transpose_lhs
// FSDPTP-NEXT: %[[V59:[a-z0-9_]+]] = nn.add %[[V55]], %[[V57]]
// FSDPTP-NEXT: %[[V60:[a-z0-9_]+]] = dist.all_reduce %[[V59]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// FSDPTP-NEXT: %[[V61:[a-z0-9_]+]], %[[V62:[a-z0-9_]+]] = nn.rms_norm_grad %[[V21]], %[[V49]]#3, %[[V60]] epsilon 1.000000e-05
// FSDPTP-NEXT: %[[V63:[a-z0-9_]+]] = nn.add %[[V45]], %[[V61]]
// FSDPTP-NEXT: %[[V64:[a-z0-9_]+]] = nn.matmul %[[V63]], %[[V49]]#4 transpose_rhs
// FSDPTP-NEXT: %[[V65:[a-z0-9_]+]] = nn.matmul %[[V18]], %[[V63]] transpose_lhs
// FSDPTP-NEXT: %[[V66:[a-z0-9_]+]] = nn.reshape %[[V64]]
// FSDPTP-NEXT: %[[V67:[a-z0-9_]+]], %[[V68:[a-z0-9_]+]], %[[V69:[a-z0-9_]+]] = nn.attention_grad %[[V15]], %[[V16]], %[[V14]], %[[V66]]
// FSDPTP-NEXT: %[[V70:[a-z0-9_]+]] = nn.rope %[[V68]] theta 1.000000e+04 inverse
// FSDPTP-NEXT: %[[V71:[a-z0-9_]+]] = nn.rope %[[V67]] theta 1.000000e+04 inverse
// FSDPTP-NEXT: %[[V72:[a-z0-9_]+]] = nn.reshape %[[V69]]
// FSDPTP-NEXT: %[[V73:[a-z0-9_]+]] = nn.reshape %[[V70]]
// FSDPTP-NEXT: %[[V74:[a-z0-9_]+]] = nn.reshape %[[V71]]
// FSDPTP-NEXT: %[[V75:[a-z0-9_]+]] = nn.matmul %[[V72]], %[[V49]]#5 transpose_rhs
// FSDPTP-NEXT: %[[V76:[a-z0-9_]+]] = nn.matmul %[[V8]], %[[V72]] transpose_lhs
// FSDPTP-NEXT: %[[V77:[a-z0-9_]+]] = nn.matmul %[[V73]], %[[V49]]#6 transpose_rhs
// FSDPTP-NEXT: %[[V78:[a-z0-9_]+]] = nn.matmul %[[V8]], %[[V73]] transpose_lhs
// FSDPTP-NEXT: %[[V79:[a-z0-9_]+]] = nn.add %[[V75]], %[[V77]]
// FSDPTP-NEXT: %[[V80:[a-z0-9_]+]] = nn.matmul %[[V74]], %[[V49]]#7 transpose_rhs
// FSDPTP-NEXT: %[[V81:[a-z0-9_]+]] = nn.matmul %[[V8]], %[[V74]] transpose_lhs
// FSDPTP-NEXT: %[[V82:[a-z0-9_]+]] = nn.add %[[V79]], %[[V80]]
// FSDPTP-NEXT: %[[V83:[a-z0-9_]+]] = dist.all_reduce %[[V82]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// FSDPTP-NEXT: %[[V84:[a-z0-9_]+]], %[[V85:[a-z0-9_]+]] = nn.rms_norm_grad %[[V4]], %[[V49]]#8, %[[V83]] epsilon 1.000000e-05
// FSDPTP-NEXT: dist.free %[[V48]] : tensor<992xf32>
// FSDPTP-NEXT: %[[V86:[a-z0-9_]+]] = dist.bucket %[[V51]], %[[V56]], %[[V58]], %[[V62]], %[[V65]], %[[V76]], %[[V78]], %[[V81]], %[[V85]] offsets = [0, 96, 192, 288, 296, 360, 392, 424, 488] chunks = 2 split_dims = [1, 0, 0, 0, 1, 0, 0, 0, 0] : tensor<12x16xf32>, tensor<16x12xf32>, tensor<16x12xf32>, tensor<16xf32>, tensor<8x16xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<992xf32>
// FSDPTP-NEXT: %[[V87:[a-z0-9_]+]] = dist.reduce_scatter %[[V86]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<992xf32> -> tensor<496xf32>
// FSDPTP-NEXT: dist.free %[[V86]] : tensor<992xf32>
// FSDPTP-NEXT: %[[V88:[a-z0-9_]+]]:9 = dist.unbucket %[[V87]] offsets = [0, 96, 192, 288, 296, 360, 392, 424, 488] : tensor<496xf32> -> tensor<12x8xf32>, tensor<8x12xf32>, tensor<8x12xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32>
// FSDPTP-NEXT: %[[V89:[a-z0-9_]+]] = nn.add %[[V63]], %[[V84]]
// FSDPTP-NEXT: %[[V90:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V89]]
// FSDPTP-NEXT: %[[V91:[a-z0-9_]+]] = dist.bucket %[[V43]], %[[V46]], %[[V90]] offsets = [0, 128, 136] chunks = 2 split_dims = [0, 0, 1] : tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32> -> tensor<528xf32>
// FSDPTP-NEXT: %[[V92:[a-z0-9_]+]] = dist.reduce_scatter %[[V91]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<528xf32> -> tensor<264xf32>
// FSDPTP-NEXT: dist.free %[[V91]] : tensor<528xf32>
// FSDPTP-NEXT: %[[V93:[a-z0-9_]+]]:3 = dist.unbucket %[[V92]] offsets = [0, 128, 136] : tensor<264xf32> -> tensor<8x16xf32>, tensor<8xf32>, tensor<16x8xf32>
// FSDPTP-NEXT: return %[[V37]], %[[V93]]#2, %[[V88]]#8, %[[V88]]#7, %[[V88]]#6, %[[V88]]#5, %[[V88]]#4, %[[V88]]#3, %[[V88]]#2, %[[V88]]#1, %[[V88]]#0, %[[V93]]#1, %[[V93]]#0 : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x12xf32>, tensor<8x12xf32>, tensor<12x8xf32>, tensor<8xf32>, tensor<8x16xf32>
func.func @llama(
    %ids: tensor<4x8xi32>, %labels: tensor<4x8xi32>,
    %embed: tensor<32x16xf32> {nn.param, nn.name = "tok_embeddings.weight"},
    %attn_norm: tensor<16xf32> {nn.param, nn.name = "layers.0.attention_norm.weight"},
    %wq: tensor<16x16xf32> {nn.param, nn.name = "layers.0.attention.wq.weight"},
    %wk: tensor<16x8xf32> {nn.param, nn.name = "layers.0.attention.wk.weight"},
    %wv: tensor<16x8xf32> {nn.param, nn.name = "layers.0.attention.wv.weight"},
    %wo: tensor<16x16xf32> {nn.param, nn.name = "layers.0.attention.wo.weight"},
    %ffn_norm: tensor<16xf32> {nn.param, nn.name = "layers.0.ffn_norm.weight"},
    %w1: tensor<16x24xf32> {nn.param, nn.name = "layers.0.feed_forward.w1.weight"},
    %w3: tensor<16x24xf32> {nn.param, nn.name = "layers.0.feed_forward.w3.weight"},
    %w2: tensor<24x16xf32> {nn.param, nn.name = "layers.0.feed_forward.w2.weight"},
    %norm: tensor<16xf32> {nn.param, nn.name = "norm.weight"},
    %output: tensor<16x32xf32> {nn.param, nn.name = "output.weight"}) -> tensor<f32> {
  %h = nn.embedding %ids, %embed : (tensor<4x8xi32>, tensor<32x16xf32>) -> tensor<4x8x16xf32>
  %x = nn.rms_norm %h, %attn_norm epsilon 1.0e-05 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %q2 = nn.linear %x, %wq : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %k2 = nn.linear %x, %wk : (tensor<4x8x16xf32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %v2 = nn.linear %x, %wv : (tensor<4x8x16xf32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %q = nn.reshape %q2 : (tensor<4x8x16xf32>) -> tensor<4x8x4x4xf32>
  %k = nn.reshape %k2 : (tensor<4x8x8xf32>) -> tensor<4x8x2x4xf32>
  %v = nn.reshape %v2 : (tensor<4x8x8xf32>) -> tensor<4x8x2x4xf32>
  %qr = nn.rope %q theta 1.0e+04 : (tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %kr = nn.rope %k theta 1.0e+04 : (tensor<4x8x2x4xf32>) -> tensor<4x8x2x4xf32>
  %o = nn.attention %qr, %kr, %v : (tensor<4x8x4x4xf32>, tensor<4x8x2x4xf32>, tensor<4x8x2x4xf32>) -> tensor<4x8x4x4xf32>
  %o2 = nn.reshape %o : (tensor<4x8x4x4xf32>) -> tensor<4x8x16xf32>
  %attn = nn.linear %o2, %wo : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %h1 = nn.add %h, %attn : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = nn.rms_norm %h1, %ffn_norm epsilon 1.0e-05 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %gate = nn.linear %y, %w1 : (tensor<4x8x16xf32>, tensor<16x24xf32>) -> tensor<4x8x24xf32>
  %up = nn.linear %y, %w3 : (tensor<4x8x16xf32>, tensor<16x24xf32>) -> tensor<4x8x24xf32>
  %act = nn.silu %gate : (tensor<4x8x24xf32>) -> tensor<4x8x24xf32>
  %gated = nn.mul %act, %up : (tensor<4x8x24xf32>, tensor<4x8x24xf32>) -> tensor<4x8x24xf32>
  %down = nn.linear %gated, %w2 : (tensor<4x8x24xf32>, tensor<24x16xf32>) -> tensor<4x8x16xf32>
  %h2 = nn.add %h1, %down : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %f = nn.rms_norm %h2, %norm epsilon 1.0e-05 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %logits = nn.linear %f, %output : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that padded parameters are bucketed too (fsdp=4): layers.0.fc1 has 10
// rows and layers.1.fc1 6, so their shards are padded (3 and 2 rows). The
// bucket packs the padded local shards (they divide by construction),
// `padded` unbucket drops the padding rows of the gathered tensors, and the
// gradient bucket pads the whole gradients into ceil(n / 4)-row parts before
// the reduce-scatter: one gather per unit and pass and one reduce-scatter
// per unit, as for even sizes (layers.0.fc2, which the backward pass of
// layers.0 alone reads, keeps its own gather).
// FSDP-LABEL: func.func @padded(
// FSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 48] : tensor<3x16xf32>, tensor<4x6xf32> -> tensor<72xf32>
// FSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<72xf32> -> tensor<288xf32>
// FSDP-NEXT: dist.free %[[V0]] : tensor<72xf32>
// FSDP-NEXT: %[[V2:[a-z0-9_]+]]:2 = dist.unbucket %[[V1]] offsets = [0, 48] chunks = 4 padded : tensor<288xf32> -> tensor<10x16xf32>, tensor<16x6xf32>
// FSDP-NEXT: %[[V3:[a-z0-9_]+]] = nn.linear %arg0, %[[V2]]#0
// FSDP-NEXT: %[[V4:[a-z0-9_]+]] = nn.silu %[[V3]]
// FSDP-NEXT: %[[V5:[a-z0-9_]+]] = nn.linear %[[V4]], %[[V2]]#1
// FSDP-NEXT: dist.free %[[V1]] : tensor<288xf32>
// FSDP-NEXT: %[[V6:[a-z0-9_]+]] = nn.silu %[[V5]]
// FSDP-NEXT: %[[V7:[a-z0-9_]+]] = dist.bucket %arg4, %arg5 offsets = [0, 32] : tensor<2x16xf32>, tensor<4x12xf32> -> tensor<80xf32>
// FSDP-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %[[V7]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<80xf32> -> tensor<320xf32>
// FSDP-NEXT: dist.free %[[V7]] : tensor<80xf32>
// FSDP-NEXT: %[[V9:[a-z0-9_]+]]:2 = dist.unbucket %[[V8]] offsets = [0, 32] chunks = 4 padded : tensor<320xf32> -> tensor<6x16xf32>, tensor<16x12xf32>
// FSDP-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V6]], %[[V9]]#0
// FSDP-NEXT: %[[V11:[a-z0-9_]+]] = nn.silu %[[V10]]
// FSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V9]]#1
// FSDP-NEXT: dist.free %[[V8]] : tensor<320xf32>
// FSDP-NEXT: %[[V13:[a-z0-9_]+]] = nn.cross_entropy %[[V12]], %arg1
// FSDP-NEXT: %[[V14:[a-z0-9_]+]] = dist.all_reduce %[[V13]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// FSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V12]], %arg1, %arg6 scale 1.250000e-01
// FSDP-NEXT: %[[V16:[a-z0-9_]+]] = dist.bucket %arg5, %arg4 offsets = [0, 48] : tensor<4x12xf32>, tensor<2x16xf32> -> tensor<80xf32>
// FSDP-NEXT: %[[V17:[a-z0-9_]+]] = dist.all_gather %[[V16]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<80xf32> -> tensor<320xf32>
// FSDP-NEXT: dist.free %[[V16]] : tensor<80xf32>
// FSDP-NEXT: %[[V18:[a-z0-9_]+]]:2 = dist.unbucket %[[V17]] offsets = [0, 48] chunks = 4 padded : tensor<320xf32> -> tensor<16x12xf32>, tensor<6x16xf32>
// FSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.matmul %[[V15]], %[[V18]]#0 transpose_rhs
// FSDP-NEXT: %[[V20:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V15]] transpose_lhs
// FSDP-NEXT: %[[V21:[a-z0-9_]+]] = nn.silu_grad %[[V10]], %[[V19]]
// FSDP-NEXT: %[[V22:[a-z0-9_]+]] = nn.matmul %[[V21]], %[[V18]]#1 transpose_rhs
// FSDP-NEXT: dist.free %[[V17]] : tensor<320xf32>
// FSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.matmul %[[V6]], %[[V21]] transpose_lhs
// FSDP-NEXT: %[[V24:[a-z0-9_]+]] = dist.bucket %[[V20]], %[[V23]] offsets = [0, 48] chunks = 4 padded : tensor<16x12xf32>, tensor<6x16xf32> -> tensor<320xf32>
// FSDP-NEXT: %[[V25:[a-z0-9_]+]] = dist.reduce_scatter %[[V24]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<320xf32> -> tensor<80xf32>
// FSDP-NEXT: dist.free %[[V24]] : tensor<320xf32>
// FSDP-NEXT: %[[V26:[a-z0-9_]+]]:2 = dist.unbucket %[[V25]] offsets = [0, 48] : tensor<80xf32> -> tensor<4x12xf32>, tensor<2x16xf32>
// FSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.silu_grad %[[V5]], %[[V22]]
// FSDP-NEXT: %[[V28:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x6xf32> -> tensor<16x6xf32>
// FSDP-NEXT: %[[V29:[a-z0-9_]+]] = nn.matmul %[[V27]], %[[V28]] transpose_rhs
// FSDP-NEXT: dist.free %[[V28]] : tensor<16x6xf32>
// FSDP-NEXT: %[[V30:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V27]] transpose_lhs
// FSDP-NEXT: %[[V31:[a-z0-9_]+]] = nn.silu_grad %[[V3]], %[[V29]]
// FSDP-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %arg0, %[[V31]] transpose_lhs
// FSDP-NEXT: %[[V33:[a-z0-9_]+]] = dist.bucket %[[V30]], %[[V32]] offsets = [0, 24] chunks = 4 padded : tensor<16x6xf32>, tensor<10x16xf32> -> tensor<288xf32>
// FSDP-NEXT: %[[V34:[a-z0-9_]+]] = dist.reduce_scatter %[[V33]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<288xf32> -> tensor<72xf32>
// FSDP-NEXT: dist.free %[[V33]] : tensor<288xf32>
// FSDP-NEXT: %[[V35:[a-z0-9_]+]]:2 = dist.unbucket %[[V34]] offsets = [0, 24] : tensor<72xf32> -> tensor<4x6xf32>, tensor<3x16xf32>
// FSDP-NEXT: return %[[V14]], %[[V35]]#1, %[[V35]]#0, %[[V26]]#1, %[[V26]]#0 : tensor<f32>, tensor<3x16xf32>, tensor<4x6xf32>, tensor<2x16xf32>, tensor<4x12xf32>
func.func @padded(%x: tensor<8x10xf32>, %labels: tensor<8xi32>,
    %w0a: tensor<10x16xf32> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w0b: tensor<16x6xf32> {nn.param, nn.name = "layers.0.fc2.weight"},
    %w1a: tensor<6x16xf32> {nn.param, nn.name = "layers.1.fc1.weight"},
    %w1b: tensor<16x12xf32> {nn.param, nn.name = "layers.1.fc2.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0a : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  %a0 = nn.silu %h0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h1 = nn.linear %a0, %w0b : (tensor<8x16xf32>, tensor<16x6xf32>) -> tensor<8x6xf32>
  %a1 = nn.silu %h1 : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %h2 = nn.linear %a1, %w1a : (tensor<8x6xf32>, tensor<6x16xf32>) -> tensor<8x16xf32>
  %a2 = nn.silu %h2 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a2, %w1b : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
