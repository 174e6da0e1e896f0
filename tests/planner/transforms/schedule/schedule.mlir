// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="prefetch=1" --plan-verify-spmd | FileCheck %s --check-prefix=FSDP
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="prefetch=0" --plan-verify-spmd | FileCheck %s --check-prefix=P0
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="prefetch=2" --plan-verify-spmd | FileCheck %s --check-prefix=P2
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=dp=2,fsdp=2 axes=dp,fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule --plan-verify-spmd | FileCheck %s --check-prefix=HSDP

// plan-schedule after plan-bucketing: every collective is a start / wait
// pair. Parameter-gather steps (one unit, one pass) start k steps ahead:
// right after the wait of the step k before (and its bucket's free), the
// first k at the entry; forward and backward steps form one sequence, so
// the last forward unit prefetches the first backward one. A gradient
// reduce-scatter completes just before the next unit's gradient bucket
// (overlapping that unit's backward); under HSDP its dp all-reduce starts
// there and completes one reduction later. The loss all-reduce completes at
// the return. With k = 0 (P0) each start sits right before its wait; with k = 2
// (P2) two steps run ahead.

// Tests the exact schedule of a 2-unit MLP (layers.0, layers.1): steps
// fwd layers.0, fwd layers.1, bwd layers.1, bwd layers.0 (fc2 only).
// FSDP-LABEL: func.func @mlp(
// FSDP-SAME: plan.prefetch = 1 : i64
// FSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 64] : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<128xf32>
// FSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather_start %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<128xf32> -> !dist.future<tensor<512xf32>>
// FSDP-NEXT: %[[V2:[a-z0-9_]+]] = dist.wait %[[V1]] : !dist.future<tensor<512xf32>>
// FSDP-NEXT: dist.free %[[V0]] : tensor<128xf32>
// FSDP-NEXT: %[[V3:[a-z0-9_]+]] = dist.bucket %arg4, %arg5 offsets = [0, 64] : tensor<4x16xf32>, tensor<4x12xf32> -> tensor<112xf32>
// FSDP-NEXT: %[[V4:[a-z0-9_]+]] = dist.all_gather_start %[[V3]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> !dist.future<tensor<448xf32>>
// FSDP-NEXT: %[[V5:[a-z0-9_]+]]:2 = dist.unbucket %[[V2]] offsets = [0, 64] chunks = 4 : tensor<512xf32> -> tensor<16x16xf32>, tensor<16x16xf32>
// FSDP-NEXT: %[[V6:[a-z0-9_]+]] = nn.linear %arg0, %[[V5]]#0
// FSDP-NEXT: %[[V7:[a-z0-9_]+]] = nn.silu %[[V6]]
// FSDP-NEXT: %[[V8:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V5]]#1
// FSDP-NEXT: dist.free %[[V2]] : tensor<512xf32>
// FSDP-NEXT: %[[V9:[a-z0-9_]+]] = nn.silu %[[V8]]
// FSDP-NEXT: %[[V10:[a-z0-9_]+]] = dist.wait %[[V4]] : !dist.future<tensor<448xf32>>
// FSDP-NEXT: dist.free %[[V3]] : tensor<112xf32>
// FSDP-NEXT: %[[V11:[a-z0-9_]+]] = dist.bucket %arg5, %arg4 offsets = [0, 48] : tensor<4x12xf32>, tensor<4x16xf32> -> tensor<112xf32>
// FSDP-NEXT: %[[V12:[a-z0-9_]+]] = dist.all_gather_start %[[V11]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> !dist.future<tensor<448xf32>>
// FSDP-NEXT: %[[V13:[a-z0-9_]+]]:2 = dist.unbucket %[[V10]] offsets = [0, 64] chunks = 4 : tensor<448xf32> -> tensor<16x16xf32>, tensor<16x12xf32>
// FSDP-NEXT: %[[V14:[a-z0-9_]+]] = nn.linear %[[V9]], %[[V13]]#0
// FSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.silu %[[V14]]
// FSDP-NEXT: %[[V16:[a-z0-9_]+]] = nn.linear %[[V15]], %[[V13]]#1
// FSDP-NEXT: dist.free %[[V10]] : tensor<448xf32>
// FSDP-NEXT: %[[V17:[a-z0-9_]+]] = nn.cross_entropy %[[V16]], %arg1
// FSDP-NEXT: %[[V18:[a-z0-9_]+]] = dist.all_reduce_start %[[V17]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> !dist.future<tensor<f32>>
// FSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V16]], %arg1, %arg6 scale 1.250000e-01
// FSDP-NEXT: %[[V20:[a-z0-9_]+]] = dist.wait %[[V12]] : !dist.future<tensor<448xf32>>
// FSDP-NEXT: dist.free %[[V11]] : tensor<112xf32>
// FSDP-NEXT: %[[V21:[a-z0-9_]+]] = dist.all_gather_start %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> !dist.future<tensor<16x16xf32>>
// FSDP-NEXT: %[[V22:[a-z0-9_]+]]:2 = dist.unbucket %[[V20]] offsets = [0, 48] chunks = 4 : tensor<448xf32> -> tensor<16x12xf32>, tensor<16x16xf32>
// FSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.matmul %[[V19]], %[[V22]]#0 transpose_rhs
// FSDP-NEXT: %[[V24:[a-z0-9_]+]] = nn.matmul %[[V15]], %[[V19]] transpose_lhs
// FSDP-NEXT: %[[V25:[a-z0-9_]+]] = nn.silu_grad %[[V14]], %[[V23]]
// FSDP-NEXT: %[[V26:[a-z0-9_]+]] = nn.matmul %[[V25]], %[[V22]]#1 transpose_rhs
// FSDP-NEXT: dist.free %[[V20]] : tensor<448xf32>
// FSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.matmul %[[V9]], %[[V25]] transpose_lhs
// FSDP-NEXT: %[[V28:[a-z0-9_]+]] = dist.bucket %[[V24]], %[[V27]] offsets = [0, 48] chunks = 4 : tensor<16x12xf32>, tensor<16x16xf32> -> tensor<448xf32>
// FSDP-NEXT: %[[V29:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V28]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xf32> -> !dist.future<tensor<112xf32>>
// FSDP-NEXT: %[[V30:[a-z0-9_]+]] = nn.silu_grad %[[V8]], %[[V26]]
// FSDP-NEXT: %[[V31:[a-z0-9_]+]] = dist.wait %[[V21]] : !dist.future<tensor<16x16xf32>>
// FSDP-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %[[V30]], %[[V31]] transpose_rhs
// FSDP-NEXT: dist.free %[[V31]] : tensor<16x16xf32>
// FSDP-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V30]] transpose_lhs
// FSDP-NEXT: %[[V34:[a-z0-9_]+]] = nn.silu_grad %[[V6]], %[[V32]]
// FSDP-NEXT: %[[V35:[a-z0-9_]+]] = nn.matmul %arg0, %[[V34]] transpose_lhs
// FSDP-NEXT: %[[V36:[a-z0-9_]+]] = dist.wait %[[V29]] : !dist.future<tensor<112xf32>>
// FSDP-NEXT: dist.free %[[V28]] : tensor<448xf32>
// FSDP-NEXT: %[[V37:[a-z0-9_]+]]:2 = dist.unbucket %[[V36]] offsets = [0, 48] : tensor<112xf32> -> tensor<4x12xf32>, tensor<4x16xf32>
// FSDP-NEXT: %[[V38:[a-z0-9_]+]] = dist.bucket %[[V33]], %[[V35]] offsets = [0, 64] chunks = 4 : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<512xf32>
// FSDP-NEXT: %[[V39:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V38]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<512xf32> -> !dist.future<tensor<128xf32>>
// FSDP-NEXT: %[[V40:[a-z0-9_]+]] = dist.wait %[[V39]] : !dist.future<tensor<128xf32>>
// FSDP-NEXT: dist.free %[[V38]] : tensor<512xf32>
// FSDP-NEXT: %[[V41:[a-z0-9_]+]]:2 = dist.unbucket %[[V40]] offsets = [0, 64] : tensor<128xf32> -> tensor<4x16xf32>, tensor<4x16xf32>
// FSDP-NEXT: %[[V42:[a-z0-9_]+]] = dist.wait %[[V18]] : !dist.future<tensor<f32>>
// FSDP-NEXT: return %[[V42]], %[[V41]]#1, %[[V41]]#0, %[[V37]]#1, %[[V37]]#0 : tensor<f32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>
// P0-LABEL: func.func @mlp(
// P0-SAME: plan.prefetch = 0 : i64
// P0-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 64] : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<128xf32>
// P0-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather_start %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<128xf32> -> !dist.future<tensor<512xf32>>
// P0-NEXT: %[[V2:[a-z0-9_]+]] = dist.wait %[[V1]] : !dist.future<tensor<512xf32>>
// P0-NEXT: dist.free %[[V0]] : tensor<128xf32>
// P0-NEXT: %[[V3:[a-z0-9_]+]]:2 = dist.unbucket %[[V2]] offsets = [0, 64] chunks = 4 : tensor<512xf32> -> tensor<16x16xf32>, tensor<16x16xf32>
// P0-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %arg0, %[[V3]]#0
// P0-NEXT: %[[V5:[a-z0-9_]+]] = nn.silu %[[V4]]
// P0-NEXT: %[[V6:[a-z0-9_]+]] = nn.linear %[[V5]], %[[V3]]#1
// P0-NEXT: dist.free %[[V2]] : tensor<512xf32>
// P0-NEXT: %[[V7:[a-z0-9_]+]] = nn.silu %[[V6]]
// P0-NEXT: %[[V8:[a-z0-9_]+]] = dist.bucket %arg4, %arg5 offsets = [0, 64] : tensor<4x16xf32>, tensor<4x12xf32> -> tensor<112xf32>
// P0-NEXT: %[[V9:[a-z0-9_]+]] = dist.all_gather_start %[[V8]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> !dist.future<tensor<448xf32>>
// P0-NEXT: %[[V10:[a-z0-9_]+]] = dist.wait %[[V9]] : !dist.future<tensor<448xf32>>
// P0-NEXT: dist.free %[[V8]] : tensor<112xf32>
// P0-NEXT: %[[V11:[a-z0-9_]+]]:2 = dist.unbucket %[[V10]] offsets = [0, 64] chunks = 4 : tensor<448xf32> -> tensor<16x16xf32>, tensor<16x12xf32>
// P0-NEXT: %[[V12:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V11]]#0
// P0-NEXT: %[[V13:[a-z0-9_]+]] = nn.silu %[[V12]]
// P0-NEXT: %[[V14:[a-z0-9_]+]] = nn.linear %[[V13]], %[[V11]]#1
// P0-NEXT: dist.free %[[V10]] : tensor<448xf32>
// P0-NEXT: %[[V15:[a-z0-9_]+]] = nn.cross_entropy %[[V14]], %arg1
// P0-NEXT: %[[V16:[a-z0-9_]+]] = dist.all_reduce_start %[[V15]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> !dist.future<tensor<f32>>
// P0-NEXT: %[[V17:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V14]], %arg1, %arg6 scale 1.250000e-01
// P0-NEXT: %[[V18:[a-z0-9_]+]] = dist.bucket %arg5, %arg4 offsets = [0, 48] : tensor<4x12xf32>, tensor<4x16xf32> -> tensor<112xf32>
// P0-NEXT: %[[V19:[a-z0-9_]+]] = dist.all_gather_start %[[V18]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> !dist.future<tensor<448xf32>>
// P0-NEXT: %[[V20:[a-z0-9_]+]] = dist.wait %[[V19]] : !dist.future<tensor<448xf32>>
// P0-NEXT: dist.free %[[V18]] : tensor<112xf32>
// P0-NEXT: %[[V21:[a-z0-9_]+]]:2 = dist.unbucket %[[V20]] offsets = [0, 48] chunks = 4 : tensor<448xf32> -> tensor<16x12xf32>, tensor<16x16xf32>
// P0-NEXT: %[[V22:[a-z0-9_]+]] = nn.matmul %[[V17]], %[[V21]]#0 transpose_rhs
// P0-NEXT: %[[V23:[a-z0-9_]+]] = nn.matmul %[[V13]], %[[V17]] transpose_lhs
// P0-NEXT: %[[V24:[a-z0-9_]+]] = nn.silu_grad %[[V12]], %[[V22]]
// P0-NEXT: %[[V25:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V21]]#1 transpose_rhs
// P0-NEXT: dist.free %[[V20]] : tensor<448xf32>
// P0-NEXT: %[[V26:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V24]] transpose_lhs
// P0-NEXT: %[[V27:[a-z0-9_]+]] = dist.bucket %[[V23]], %[[V26]] offsets = [0, 48] chunks = 4 : tensor<16x12xf32>, tensor<16x16xf32> -> tensor<448xf32>
// P0-NEXT: %[[V28:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V27]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xf32> -> !dist.future<tensor<112xf32>>
// P0-NEXT: %[[V29:[a-z0-9_]+]] = nn.silu_grad %[[V6]], %[[V25]]
// P0-NEXT: %[[V30:[a-z0-9_]+]] = dist.all_gather_start %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> !dist.future<tensor<16x16xf32>>
// P0-NEXT: %[[V31:[a-z0-9_]+]] = dist.wait %[[V30]] : !dist.future<tensor<16x16xf32>>
// P0-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %[[V29]], %[[V31]] transpose_rhs
// P0-NEXT: dist.free %[[V31]] : tensor<16x16xf32>
// P0-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %[[V5]], %[[V29]] transpose_lhs
// P0-NEXT: %[[V34:[a-z0-9_]+]] = nn.silu_grad %[[V4]], %[[V32]]
// P0-NEXT: %[[V35:[a-z0-9_]+]] = nn.matmul %arg0, %[[V34]] transpose_lhs
// P0-NEXT: %[[V36:[a-z0-9_]+]] = dist.wait %[[V28]] : !dist.future<tensor<112xf32>>
// P0-NEXT: dist.free %[[V27]] : tensor<448xf32>
// P0-NEXT: %[[V37:[a-z0-9_]+]]:2 = dist.unbucket %[[V36]] offsets = [0, 48] : tensor<112xf32> -> tensor<4x12xf32>, tensor<4x16xf32>
// P0-NEXT: %[[V38:[a-z0-9_]+]] = dist.bucket %[[V33]], %[[V35]] offsets = [0, 64] chunks = 4 : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<512xf32>
// P0-NEXT: %[[V39:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V38]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<512xf32> -> !dist.future<tensor<128xf32>>
// P0-NEXT: %[[V40:[a-z0-9_]+]] = dist.wait %[[V39]] : !dist.future<tensor<128xf32>>
// P0-NEXT: dist.free %[[V38]] : tensor<512xf32>
// P0-NEXT: %[[V41:[a-z0-9_]+]]:2 = dist.unbucket %[[V40]] offsets = [0, 64] : tensor<128xf32> -> tensor<4x16xf32>, tensor<4x16xf32>
// P0-NEXT: %[[V42:[a-z0-9_]+]] = dist.wait %[[V16]] : !dist.future<tensor<f32>>
// P0-NEXT: return %[[V42]], %[[V41]]#1, %[[V41]]#0, %[[V37]]#1, %[[V37]]#0 : tensor<f32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>
// P2-LABEL: func.func @mlp(
// P2-SAME: plan.prefetch = 2 : i64
// P2-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 64] : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<128xf32>
// P2-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather_start %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<128xf32> -> !dist.future<tensor<512xf32>>
// P2-NEXT: %[[V2:[a-z0-9_]+]] = dist.bucket %arg4, %arg5 offsets = [0, 64] : tensor<4x16xf32>, tensor<4x12xf32> -> tensor<112xf32>
// P2-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather_start %[[V2]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> !dist.future<tensor<448xf32>>
// P2-NEXT: %[[V4:[a-z0-9_]+]] = dist.wait %[[V1]] : !dist.future<tensor<512xf32>>
// P2-NEXT: dist.free %[[V0]] : tensor<128xf32>
// P2-NEXT: %[[V5:[a-z0-9_]+]] = dist.bucket %arg5, %arg4 offsets = [0, 48] : tensor<4x12xf32>, tensor<4x16xf32> -> tensor<112xf32>
// P2-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_gather_start %[[V5]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<112xf32> -> !dist.future<tensor<448xf32>>
// P2-NEXT: %[[V7:[a-z0-9_]+]]:2 = dist.unbucket %[[V4]] offsets = [0, 64] chunks = 4 : tensor<512xf32> -> tensor<16x16xf32>, tensor<16x16xf32>
// P2-NEXT: %[[V8:[a-z0-9_]+]] = nn.linear %arg0, %[[V7]]#0
// P2-NEXT: %[[V9:[a-z0-9_]+]] = nn.silu %[[V8]]
// P2-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V9]], %[[V7]]#1
// P2-NEXT: dist.free %[[V4]] : tensor<512xf32>
// P2-NEXT: %[[V11:[a-z0-9_]+]] = nn.silu %[[V10]]
// P2-NEXT: %[[V12:[a-z0-9_]+]] = dist.wait %[[V3]] : !dist.future<tensor<448xf32>>
// P2-NEXT: dist.free %[[V2]] : tensor<112xf32>
// P2-NEXT: %[[V13:[a-z0-9_]+]] = dist.all_gather_start %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> !dist.future<tensor<16x16xf32>>
// P2-NEXT: %[[V14:[a-z0-9_]+]]:2 = dist.unbucket %[[V12]] offsets = [0, 64] chunks = 4 : tensor<448xf32> -> tensor<16x16xf32>, tensor<16x12xf32>
// P2-NEXT: %[[V15:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V14]]#0
// P2-NEXT: %[[V16:[a-z0-9_]+]] = nn.silu %[[V15]]
// P2-NEXT: %[[V17:[a-z0-9_]+]] = nn.linear %[[V16]], %[[V14]]#1
// P2-NEXT: dist.free %[[V12]] : tensor<448xf32>
// P2-NEXT: %[[V18:[a-z0-9_]+]] = nn.cross_entropy %[[V17]], %arg1
// P2-NEXT: %[[V19:[a-z0-9_]+]] = dist.all_reduce_start %[[V18]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> !dist.future<tensor<f32>>
// P2-NEXT: %[[V20:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V17]], %arg1, %arg6 scale 1.250000e-01
// P2-NEXT: %[[V21:[a-z0-9_]+]] = dist.wait %[[V6]] : !dist.future<tensor<448xf32>>
// P2-NEXT: dist.free %[[V5]] : tensor<112xf32>
// P2-NEXT: %[[V22:[a-z0-9_]+]]:2 = dist.unbucket %[[V21]] offsets = [0, 48] chunks = 4 : tensor<448xf32> -> tensor<16x12xf32>, tensor<16x16xf32>
// P2-NEXT: %[[V23:[a-z0-9_]+]] = nn.matmul %[[V20]], %[[V22]]#0 transpose_rhs
// P2-NEXT: %[[V24:[a-z0-9_]+]] = nn.matmul %[[V16]], %[[V20]] transpose_lhs
// P2-NEXT: %[[V25:[a-z0-9_]+]] = nn.silu_grad %[[V15]], %[[V23]]
// P2-NEXT: %[[V26:[a-z0-9_]+]] = nn.matmul %[[V25]], %[[V22]]#1 transpose_rhs
// P2-NEXT: dist.free %[[V21]] : tensor<448xf32>
// P2-NEXT: %[[V27:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V25]] transpose_lhs
// P2-NEXT: %[[V28:[a-z0-9_]+]] = dist.bucket %[[V24]], %[[V27]] offsets = [0, 48] chunks = 4 : tensor<16x12xf32>, tensor<16x16xf32> -> tensor<448xf32>
// P2-NEXT: %[[V29:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V28]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xf32> -> !dist.future<tensor<112xf32>>
// P2-NEXT: %[[V30:[a-z0-9_]+]] = nn.silu_grad %[[V10]], %[[V26]]
// P2-NEXT: %[[V31:[a-z0-9_]+]] = dist.wait %[[V13]] : !dist.future<tensor<16x16xf32>>
// P2-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %[[V30]], %[[V31]] transpose_rhs
// P2-NEXT: dist.free %[[V31]] : tensor<16x16xf32>
// P2-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %[[V9]], %[[V30]] transpose_lhs
// P2-NEXT: %[[V34:[a-z0-9_]+]] = nn.silu_grad %[[V8]], %[[V32]]
// P2-NEXT: %[[V35:[a-z0-9_]+]] = nn.matmul %arg0, %[[V34]] transpose_lhs
// P2-NEXT: %[[V36:[a-z0-9_]+]] = dist.wait %[[V29]] : !dist.future<tensor<112xf32>>
// P2-NEXT: dist.free %[[V28]] : tensor<448xf32>
// P2-NEXT: %[[V37:[a-z0-9_]+]]:2 = dist.unbucket %[[V36]] offsets = [0, 48] : tensor<112xf32> -> tensor<4x12xf32>, tensor<4x16xf32>
// P2-NEXT: %[[V38:[a-z0-9_]+]] = dist.bucket %[[V33]], %[[V35]] offsets = [0, 64] chunks = 4 : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<512xf32>
// P2-NEXT: %[[V39:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V38]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<512xf32> -> !dist.future<tensor<128xf32>>
// P2-NEXT: %[[V40:[a-z0-9_]+]] = dist.wait %[[V39]] : !dist.future<tensor<128xf32>>
// P2-NEXT: dist.free %[[V38]] : tensor<512xf32>
// P2-NEXT: %[[V41:[a-z0-9_]+]]:2 = dist.unbucket %[[V40]] offsets = [0, 64] : tensor<128xf32> -> tensor<4x16xf32>, tensor<4x16xf32>
// P2-NEXT: %[[V42:[a-z0-9_]+]] = dist.wait %[[V19]] : !dist.future<tensor<f32>>
// P2-NEXT: return %[[V42]], %[[V41]]#1, %[[V41]]#0, %[[V37]]#1, %[[V37]]#0 : tensor<f32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>
// HSDP-LABEL: func.func @mlp(
// HSDP-SAME: plan.prefetch = 1 : i64
// HSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 128] : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<256xf32>
// HSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather_start %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<256xf32> -> !dist.future<tensor<512xf32>>
// HSDP-NEXT: %[[V2:[a-z0-9_]+]] = dist.wait %[[V1]] : !dist.future<tensor<512xf32>>
// HSDP-NEXT: dist.free %[[V0]] : tensor<256xf32>
// HSDP-NEXT: %[[V3:[a-z0-9_]+]] = dist.bucket %arg4, %arg5 offsets = [0, 128] : tensor<8x16xf32>, tensor<8x12xf32> -> tensor<224xf32>
// HSDP-NEXT: %[[V4:[a-z0-9_]+]] = dist.all_gather_start %[[V3]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<224xf32> -> !dist.future<tensor<448xf32>>
// HSDP-NEXT: %[[V5:[a-z0-9_]+]]:2 = dist.unbucket %[[V2]] offsets = [0, 128] chunks = 2 : tensor<512xf32> -> tensor<16x16xf32>, tensor<16x16xf32>
// HSDP-NEXT: %[[V6:[a-z0-9_]+]] = nn.linear %arg0, %[[V5]]#0
// HSDP-NEXT: %[[V7:[a-z0-9_]+]] = nn.silu %[[V6]]
// HSDP-NEXT: %[[V8:[a-z0-9_]+]] = nn.linear %[[V7]], %[[V5]]#1
// HSDP-NEXT: dist.free %[[V2]] : tensor<512xf32>
// HSDP-NEXT: %[[V9:[a-z0-9_]+]] = nn.silu %[[V8]]
// HSDP-NEXT: %[[V10:[a-z0-9_]+]] = dist.wait %[[V4]] : !dist.future<tensor<448xf32>>
// HSDP-NEXT: dist.free %[[V3]] : tensor<224xf32>
// HSDP-NEXT: %[[V11:[a-z0-9_]+]] = dist.bucket %arg5, %arg4 offsets = [0, 96] : tensor<8x12xf32>, tensor<8x16xf32> -> tensor<224xf32>
// HSDP-NEXT: %[[V12:[a-z0-9_]+]] = dist.all_gather_start %[[V11]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<224xf32> -> !dist.future<tensor<448xf32>>
// HSDP-NEXT: %[[V13:[a-z0-9_]+]]:2 = dist.unbucket %[[V10]] offsets = [0, 128] chunks = 2 : tensor<448xf32> -> tensor<16x16xf32>, tensor<16x12xf32>
// HSDP-NEXT: %[[V14:[a-z0-9_]+]] = nn.linear %[[V9]], %[[V13]]#0
// HSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.silu %[[V14]]
// HSDP-NEXT: %[[V16:[a-z0-9_]+]] = nn.linear %[[V15]], %[[V13]]#1
// HSDP-NEXT: dist.free %[[V10]] : tensor<448xf32>
// HSDP-NEXT: %[[V17:[a-z0-9_]+]] = nn.cross_entropy %[[V16]], %arg1
// HSDP-NEXT: %[[V18:[a-z0-9_]+]] = dist.all_reduce_start %[[V17]] on @mesh axes = ["dp", "fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> !dist.future<tensor<f32>>
// HSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V16]], %arg1, %arg6 scale 1.250000e-01
// HSDP-NEXT: %[[V20:[a-z0-9_]+]] = dist.wait %[[V12]] : !dist.future<tensor<448xf32>>
// HSDP-NEXT: dist.free %[[V11]] : tensor<224xf32>
// HSDP-NEXT: %[[V21:[a-z0-9_]+]] = dist.all_gather_start %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> !dist.future<tensor<16x16xf32>>
// HSDP-NEXT: %[[V22:[a-z0-9_]+]]:2 = dist.unbucket %[[V20]] offsets = [0, 96] chunks = 2 : tensor<448xf32> -> tensor<16x12xf32>, tensor<16x16xf32>
// HSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.matmul %[[V19]], %[[V22]]#0 transpose_rhs
// HSDP-NEXT: %[[V24:[a-z0-9_]+]] = nn.matmul %[[V15]], %[[V19]] transpose_lhs
// HSDP-NEXT: %[[V25:[a-z0-9_]+]] = nn.silu_grad %[[V14]], %[[V23]]
// HSDP-NEXT: %[[V26:[a-z0-9_]+]] = nn.matmul %[[V25]], %[[V22]]#1 transpose_rhs
// HSDP-NEXT: dist.free %[[V20]] : tensor<448xf32>
// HSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.matmul %[[V9]], %[[V25]] transpose_lhs
// HSDP-NEXT: %[[V28:[a-z0-9_]+]] = dist.bucket %[[V24]], %[[V27]] offsets = [0, 96] chunks = 2 : tensor<16x12xf32>, tensor<16x16xf32> -> tensor<448xf32>
// HSDP-NEXT: %[[V29:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V28]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xf32> -> !dist.future<tensor<224xf32>>
// HSDP-NEXT: %[[V30:[a-z0-9_]+]] = nn.silu_grad %[[V8]], %[[V26]]
// HSDP-NEXT: %[[V31:[a-z0-9_]+]] = dist.wait %[[V21]] : !dist.future<tensor<16x16xf32>>
// HSDP-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %[[V30]], %[[V31]] transpose_rhs
// HSDP-NEXT: dist.free %[[V31]] : tensor<16x16xf32>
// HSDP-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V30]] transpose_lhs
// HSDP-NEXT: %[[V34:[a-z0-9_]+]] = nn.silu_grad %[[V6]], %[[V32]]
// HSDP-NEXT: %[[V35:[a-z0-9_]+]] = nn.matmul %arg0, %[[V34]] transpose_lhs
// HSDP-NEXT: %[[V36:[a-z0-9_]+]] = dist.wait %[[V29]] : !dist.future<tensor<224xf32>>
// HSDP-NEXT: dist.free %[[V28]] : tensor<448xf32>
// HSDP-NEXT: %[[V37:[a-z0-9_]+]] = dist.all_reduce_start %[[V36]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<224xf32> -> !dist.future<tensor<224xf32>>
// HSDP-NEXT: %[[V38:[a-z0-9_]+]] = dist.bucket %[[V33]], %[[V35]] offsets = [0, 128] chunks = 2 : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<512xf32>
// HSDP-NEXT: %[[V39:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V38]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<512xf32> -> !dist.future<tensor<256xf32>>
// HSDP-NEXT: %[[V40:[a-z0-9_]+]] = dist.wait %[[V39]] : !dist.future<tensor<256xf32>>
// HSDP-NEXT: dist.free %[[V38]] : tensor<512xf32>
// HSDP-NEXT: %[[V41:[a-z0-9_]+]] = dist.all_reduce_start %[[V40]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<256xf32> -> !dist.future<tensor<256xf32>>
// HSDP-NEXT: %[[V42:[a-z0-9_]+]] = dist.wait %[[V41]] : !dist.future<tensor<256xf32>>
// HSDP-NEXT: %[[V43:[a-z0-9_]+]]:2 = dist.unbucket %[[V42]] offsets = [0, 128] : tensor<256xf32> -> tensor<8x16xf32>, tensor<8x16xf32>
// HSDP-NEXT: %[[V44:[a-z0-9_]+]] = dist.wait %[[V37]] : !dist.future<tensor<224xf32>>
// HSDP-NEXT: %[[V45:[a-z0-9_]+]]:2 = dist.unbucket %[[V44]] offsets = [0, 96] : tensor<224xf32> -> tensor<8x12xf32>, tensor<8x16xf32>
// HSDP-NEXT: %[[V46:[a-z0-9_]+]] = dist.wait %[[V18]] : !dist.future<tensor<f32>>
// HSDP-NEXT: return %[[V46]], %[[V43]]#1, %[[V43]]#0, %[[V45]]#1, %[[V45]]#0 : tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x12xf32>
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

// Tests the exact schedule of one Llama block: steps fwd root, fwd
// layers.0, bwd root (norm, head), bwd layers.0; the layers.0 gradient
// reduce-scatter overlaps the embedding's backward.
// FSDP-LABEL: func.func @llama(
// FSDP-SAME: plan.prefetch = 1 : i64
// FSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg12, %arg13 offsets = [0, 128, 132] : tensor<8x16xf32>, tensor<4xf32>, tensor<4x32xf32> -> tensor<260xf32>
// FSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather_start %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<260xf32> -> !dist.future<tensor<1040xf32>>
// FSDP-NEXT: %[[V2:[a-z0-9_]+]] = dist.wait %[[V1]] : !dist.future<tensor<1040xf32>>
// FSDP-NEXT: dist.free %[[V0]] : tensor<260xf32>
// FSDP-NEXT: %[[V3:[a-z0-9_]+]] = dist.bucket %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11 offsets = [0, 4, 68, 100, 132, 196, 200, 296, 392] : tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<6x16xf32> -> tensor<488xf32>
// FSDP-NEXT: %[[V4:[a-z0-9_]+]] = dist.all_gather_start %[[V3]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<488xf32> -> !dist.future<tensor<1952xf32>>
// FSDP-NEXT: %[[V5:[a-z0-9_]+]]:3 = dist.unbucket %[[V2]] offsets = [0, 128, 132] chunks = 4 : tensor<1040xf32> -> tensor<32x16xf32>, tensor<16xf32>, tensor<16x32xf32>
// FSDP-NEXT: %[[V6:[a-z0-9_]+]] = nn.embedding %arg0, %[[V5]]#0
// FSDP-NEXT: %[[V7:[a-z0-9_]+]] = dist.wait %[[V4]] : !dist.future<tensor<1952xf32>>
// FSDP-NEXT: dist.free %[[V3]] : tensor<488xf32>
// FSDP-NEXT: %[[V8:[a-z0-9_]+]] = dist.bucket %arg13, %arg12 offsets = [0, 128] : tensor<4x32xf32>, tensor<4xf32> -> tensor<132xf32>
// FSDP-NEXT: %[[V9:[a-z0-9_]+]] = dist.all_gather_start %[[V8]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<132xf32> -> !dist.future<tensor<528xf32>>
// FSDP-NEXT: %[[V10:[a-z0-9_]+]]:9 = dist.unbucket %[[V7]] offsets = [0, 4, 68, 100, 132, 196, 200, 296, 392] chunks = 4 : tensor<1952xf32> -> tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<24x16xf32>
// FSDP-NEXT: %[[V11:[a-z0-9_]+]] = nn.rms_norm %[[V6]], %[[V10]]#0 epsilon 1.000000e-05
// FSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V10]]#1
// FSDP-NEXT: %[[V13:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V10]]#2
// FSDP-NEXT: %[[V14:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V10]]#3
// FSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.reshape %[[V12]]
// FSDP-NEXT: %[[V16:[a-z0-9_]+]] = nn.reshape %[[V13]]
// FSDP-NEXT: %[[V17:[a-z0-9_]+]] = nn.reshape %[[V14]]
// FSDP-NEXT: %[[V18:[a-z0-9_]+]] = nn.rope %[[V15]] theta 1.000000e+04
// FSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.rope %[[V16]] theta 1.000000e+04
// FSDP-NEXT: %[[V20:[a-z0-9_]+]] = nn.attention %[[V18]], %[[V19]], %[[V17]]
// FSDP-NEXT: %[[V21:[a-z0-9_]+]] = nn.reshape %[[V20]]
// FSDP-NEXT: %[[V22:[a-z0-9_]+]] = nn.linear %[[V21]], %[[V10]]#4
// FSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.add %[[V6]], %[[V22]]
// FSDP-NEXT: %[[V24:[a-z0-9_]+]] = nn.rms_norm %[[V23]], %[[V10]]#5 epsilon 1.000000e-05
// FSDP-NEXT: %[[V25:[a-z0-9_]+]] = nn.linear %[[V24]], %[[V10]]#6
// FSDP-NEXT: %[[V26:[a-z0-9_]+]] = nn.linear %[[V24]], %[[V10]]#7
// FSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.silu %[[V25]]
// FSDP-NEXT: %[[V28:[a-z0-9_]+]] = nn.mul %[[V27]], %[[V26]]
// FSDP-NEXT: %[[V29:[a-z0-9_]+]] = nn.linear %[[V28]], %[[V10]]#8
// FSDP-NEXT: dist.free %[[V7]] : tensor<1952xf32>
// FSDP-NEXT: %[[V30:[a-z0-9_]+]] = nn.add %[[V23]], %[[V29]]
// FSDP-NEXT: %[[V31:[a-z0-9_]+]] = nn.rms_norm %[[V30]], %[[V5]]#1 epsilon 1.000000e-05
// FSDP-NEXT: %[[V32:[a-z0-9_]+]] = nn.linear %[[V31]], %[[V5]]#2
// FSDP-NEXT: dist.free %[[V2]] : tensor<1040xf32>
// FSDP-NEXT: %[[V33:[a-z0-9_]+]] = nn.cross_entropy %[[V32]], %arg1
// FSDP-NEXT: %[[V34:[a-z0-9_]+]] = dist.all_reduce_start %[[V33]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> !dist.future<tensor<f32>>
// FSDP-NEXT: %[[V35:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V32]], %arg1, %arg14 scale 3.125000e-02
// FSDP-NEXT: %[[V36:[a-z0-9_]+]] = dist.wait %[[V9]] : !dist.future<tensor<528xf32>>
// FSDP-NEXT: dist.free %[[V8]] : tensor<132xf32>
// FSDP-NEXT: %[[V37:[a-z0-9_]+]] = dist.bucket %arg11, %arg10, %arg9, %arg8, %arg7, %arg6, %arg5, %arg4, %arg3 offsets = [0, 96, 192, 288, 292, 356, 388, 420, 484] : tensor<6x16xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32> -> tensor<488xf32>
// FSDP-NEXT: %[[V38:[a-z0-9_]+]] = dist.all_gather_start %[[V37]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<488xf32> -> !dist.future<tensor<1952xf32>>
// FSDP-NEXT: %[[V39:[a-z0-9_]+]]:2 = dist.unbucket %[[V36]] offsets = [0, 128] chunks = 4 : tensor<528xf32> -> tensor<16x32xf32>, tensor<16xf32>
// FSDP-NEXT: %[[V40:[a-z0-9_]+]] = nn.matmul %[[V35]], %[[V39]]#0 transpose_rhs
// FSDP-NEXT: %[[V41:[a-z0-9_]+]] = nn.matmul %[[V31]], %[[V35]] transpose_lhs
// FSDP-NEXT: %[[V42:[a-z0-9_]+]], %[[V43:[a-z0-9_]+]] = nn.rms_norm_grad %[[V30]], %[[V39]]#1, %[[V40]] epsilon 1.000000e-05
// FSDP-NEXT: dist.free %[[V36]] : tensor<528xf32>
// FSDP-NEXT: %[[V44:[a-z0-9_]+]] = dist.wait %[[V38]] : !dist.future<tensor<1952xf32>>
// FSDP-NEXT: dist.free %[[V37]] : tensor<488xf32>
// FSDP-NEXT: %[[V45:[a-z0-9_]+]]:9 = dist.unbucket %[[V44]] offsets = [0, 96, 192, 288, 292, 356, 388, 420, 484] chunks = 4 : tensor<1952xf32> -> tensor<24x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32>
// FSDP-NEXT: %[[V46:[a-z0-9_]+]] = nn.matmul %[[V42]], %[[V45]]#0 transpose_rhs
// FSDP-NEXT: %[[V47:[a-z0-9_]+]] = nn.matmul %[[V28]], %[[V42]] transpose_lhs
// FSDP-NEXT: %[[V48:[a-z0-9_]+]] = nn.mul %[[V46]], %[[V26]]
// FSDP-NEXT: %[[V49:[a-z0-9_]+]] = nn.mul %[[V46]], %[[V27]]
// FSDP-NEXT: %[[V50:[a-z0-9_]+]] = nn.silu_grad %[[V25]], %[[V48]]
// FSDP-NEXT: %[[V51:[a-z0-9_]+]] = nn.matmul %[[V49]], %[[V45]]#1 transpose_rhs
// FSDP-NEXT: %[[V52:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V49]] transpose_lhs
// FSDP-NEXT: %[[V53:[a-z0-9_]+]] = nn.matmul %[[V50]], %[[V45]]#2 transpose_rhs
// FSDP-NEXT: %[[V54:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V50]] transpose_lhs
// FSDP-NEXT: %[[V55:[a-z0-9_]+]] = nn.add %[[V51]], %[[V53]]
// FSDP-NEXT: %[[V56:[a-z0-9_]+]], %[[V57:[a-z0-9_]+]] = nn.rms_norm_grad %[[V23]], %[[V45]]#3, %[[V55]] epsilon 1.000000e-05
// FSDP-NEXT: %[[V58:[a-z0-9_]+]] = nn.add %[[V42]], %[[V56]]
// FSDP-NEXT: %[[V59:[a-z0-9_]+]] = nn.matmul %[[V58]], %[[V45]]#4 transpose_rhs
// FSDP-NEXT: %[[V60:[a-z0-9_]+]] = nn.matmul %[[V21]], %[[V58]] transpose_lhs
// FSDP-NEXT: %[[V61:[a-z0-9_]+]] = nn.reshape %[[V59]]
// FSDP-NEXT: %[[V62:[a-z0-9_]+]], %[[V63:[a-z0-9_]+]], %[[V64:[a-z0-9_]+]] = nn.attention_grad %[[V18]], %[[V19]], %[[V17]], %[[V61]]
// FSDP-NEXT: %[[V65:[a-z0-9_]+]] = nn.rope %[[V63]] theta 1.000000e+04 inverse
// FSDP-NEXT: %[[V66:[a-z0-9_]+]] = nn.rope %[[V62]] theta 1.000000e+04 inverse
// FSDP-NEXT: %[[V67:[a-z0-9_]+]] = nn.reshape %[[V64]]
// FSDP-NEXT: %[[V68:[a-z0-9_]+]] = nn.reshape %[[V65]]
// FSDP-NEXT: %[[V69:[a-z0-9_]+]] = nn.reshape %[[V66]]
// FSDP-NEXT: %[[V70:[a-z0-9_]+]] = nn.matmul %[[V67]], %[[V45]]#5 transpose_rhs
// FSDP-NEXT: %[[V71:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V67]] transpose_lhs
// FSDP-NEXT: %[[V72:[a-z0-9_]+]] = nn.matmul %[[V68]], %[[V45]]#6 transpose_rhs
// FSDP-NEXT: %[[V73:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V68]] transpose_lhs
// FSDP-NEXT: %[[V74:[a-z0-9_]+]] = nn.add %[[V70]], %[[V72]]
// FSDP-NEXT: %[[V75:[a-z0-9_]+]] = nn.matmul %[[V69]], %[[V45]]#7 transpose_rhs
// FSDP-NEXT: %[[V76:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V69]] transpose_lhs
// FSDP-NEXT: %[[V77:[a-z0-9_]+]] = nn.add %[[V74]], %[[V75]]
// FSDP-NEXT: %[[V78:[a-z0-9_]+]], %[[V79:[a-z0-9_]+]] = nn.rms_norm_grad %[[V6]], %[[V45]]#8, %[[V77]] epsilon 1.000000e-05
// FSDP-NEXT: dist.free %[[V44]] : tensor<1952xf32>
// FSDP-NEXT: %[[V80:[a-z0-9_]+]] = dist.bucket %[[V47]], %[[V52]], %[[V54]], %[[V57]], %[[V60]], %[[V71]], %[[V73]], %[[V76]], %[[V79]] offsets = [0, 96, 192, 288, 292, 356, 388, 420, 484] chunks = 4 : tensor<24x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32> -> tensor<1952xf32>
// FSDP-NEXT: %[[V81:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V80]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<1952xf32> -> !dist.future<tensor<488xf32>>
// FSDP-NEXT: %[[V82:[a-z0-9_]+]] = nn.add %[[V58]], %[[V78]]
// FSDP-NEXT: %[[V83:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V82]]
// FSDP-NEXT: %[[V84:[a-z0-9_]+]] = dist.wait %[[V81]] : !dist.future<tensor<488xf32>>
// FSDP-NEXT: dist.free %[[V80]] : tensor<1952xf32>
// FSDP-NEXT: %[[V85:[a-z0-9_]+]]:9 = dist.unbucket %[[V84]] offsets = [0, 96, 192, 288, 292, 356, 388, 420, 484] : tensor<488xf32> -> tensor<6x16xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32>
// FSDP-NEXT: %[[V86:[a-z0-9_]+]] = dist.bucket %[[V41]], %[[V43]], %[[V83]] offsets = [0, 128, 132] chunks = 4 : tensor<16x32xf32>, tensor<16xf32>, tensor<32x16xf32> -> tensor<1040xf32>
// FSDP-NEXT: %[[V87:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V86]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<1040xf32> -> !dist.future<tensor<260xf32>>
// FSDP-NEXT: %[[V88:[a-z0-9_]+]] = dist.wait %[[V87]] : !dist.future<tensor<260xf32>>
// FSDP-NEXT: dist.free %[[V86]] : tensor<1040xf32>
// FSDP-NEXT: %[[V89:[a-z0-9_]+]]:3 = dist.unbucket %[[V88]] offsets = [0, 128, 132] : tensor<260xf32> -> tensor<4x32xf32>, tensor<4xf32>, tensor<8x16xf32>
// FSDP-NEXT: %[[V90:[a-z0-9_]+]] = dist.wait %[[V34]] : !dist.future<tensor<f32>>
// FSDP-NEXT: return %[[V90]], %[[V89]]#2, %[[V85]]#8, %[[V85]]#7, %[[V85]]#6, %[[V85]]#5, %[[V85]]#4, %[[V85]]#3, %[[V85]]#2, %[[V85]]#1, %[[V85]]#0, %[[V89]]#1, %[[V89]]#0 : tensor<f32>, tensor<8x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<6x16xf32>, tensor<4xf32>, tensor<4x32xf32>
// HSDP-LABEL: func.func @llama(
// HSDP-SAME: plan.prefetch = 1 : i64
// HSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.bucket %arg2, %arg12, %arg13 offsets = [0, 256, 264] : tensor<16x16xf32>, tensor<8xf32>, tensor<8x32xf32> -> tensor<520xf32>
// HSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_gather_start %[[V0]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<520xf32> -> !dist.future<tensor<1040xf32>>
// HSDP-NEXT: %[[V2:[a-z0-9_]+]] = dist.wait %[[V1]] : !dist.future<tensor<1040xf32>>
// HSDP-NEXT: dist.free %[[V0]] : tensor<520xf32>
// HSDP-NEXT: %[[V3:[a-z0-9_]+]] = dist.bucket %arg3, %arg4, %arg5, %arg6, %arg7, %arg8, %arg9, %arg10, %arg11 offsets = [0, 8, 136, 200, 264, 392, 400, 592, 784] : tensor<8xf32>, tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<12x16xf32> -> tensor<976xf32>
// HSDP-NEXT: %[[V4:[a-z0-9_]+]] = dist.all_gather_start %[[V3]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<976xf32> -> !dist.future<tensor<1952xf32>>
// HSDP-NEXT: %[[V5:[a-z0-9_]+]]:3 = dist.unbucket %[[V2]] offsets = [0, 256, 264] chunks = 2 : tensor<1040xf32> -> tensor<32x16xf32>, tensor<16xf32>, tensor<16x32xf32>
// HSDP-NEXT: %[[V6:[a-z0-9_]+]] = nn.embedding %arg0, %[[V5]]#0
// HSDP-NEXT: %[[V7:[a-z0-9_]+]] = dist.wait %[[V4]] : !dist.future<tensor<1952xf32>>
// HSDP-NEXT: dist.free %[[V3]] : tensor<976xf32>
// HSDP-NEXT: %[[V8:[a-z0-9_]+]] = dist.bucket %arg13, %arg12 offsets = [0, 256] : tensor<8x32xf32>, tensor<8xf32> -> tensor<264xf32>
// HSDP-NEXT: %[[V9:[a-z0-9_]+]] = dist.all_gather_start %[[V8]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<264xf32> -> !dist.future<tensor<528xf32>>
// HSDP-NEXT: %[[V10:[a-z0-9_]+]]:9 = dist.unbucket %[[V7]] offsets = [0, 8, 136, 200, 264, 392, 400, 592, 784] chunks = 2 : tensor<1952xf32> -> tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<24x16xf32>
// HSDP-NEXT: %[[V11:[a-z0-9_]+]] = nn.rms_norm %[[V6]], %[[V10]]#0 epsilon 1.000000e-05
// HSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V10]]#1
// HSDP-NEXT: %[[V13:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V10]]#2
// HSDP-NEXT: %[[V14:[a-z0-9_]+]] = nn.linear %[[V11]], %[[V10]]#3
// HSDP-NEXT: %[[V15:[a-z0-9_]+]] = nn.reshape %[[V12]]
// HSDP-NEXT: %[[V16:[a-z0-9_]+]] = nn.reshape %[[V13]]
// HSDP-NEXT: %[[V17:[a-z0-9_]+]] = nn.reshape %[[V14]]
// HSDP-NEXT: %[[V18:[a-z0-9_]+]] = nn.rope %[[V15]] theta 1.000000e+04
// HSDP-NEXT: %[[V19:[a-z0-9_]+]] = nn.rope %[[V16]] theta 1.000000e+04
// HSDP-NEXT: %[[V20:[a-z0-9_]+]] = nn.attention %[[V18]], %[[V19]], %[[V17]]
// HSDP-NEXT: %[[V21:[a-z0-9_]+]] = nn.reshape %[[V20]]
// HSDP-NEXT: %[[V22:[a-z0-9_]+]] = nn.linear %[[V21]], %[[V10]]#4
// HSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.add %[[V6]], %[[V22]]
// HSDP-NEXT: %[[V24:[a-z0-9_]+]] = nn.rms_norm %[[V23]], %[[V10]]#5 epsilon 1.000000e-05
// HSDP-NEXT: %[[V25:[a-z0-9_]+]] = nn.linear %[[V24]], %[[V10]]#6
// HSDP-NEXT: %[[V26:[a-z0-9_]+]] = nn.linear %[[V24]], %[[V10]]#7
// HSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.silu %[[V25]]
// HSDP-NEXT: %[[V28:[a-z0-9_]+]] = nn.mul %[[V27]], %[[V26]]
// HSDP-NEXT: %[[V29:[a-z0-9_]+]] = nn.linear %[[V28]], %[[V10]]#8
// HSDP-NEXT: dist.free %[[V7]] : tensor<1952xf32>
// HSDP-NEXT: %[[V30:[a-z0-9_]+]] = nn.add %[[V23]], %[[V29]]
// HSDP-NEXT: %[[V31:[a-z0-9_]+]] = nn.rms_norm %[[V30]], %[[V5]]#1 epsilon 1.000000e-05
// HSDP-NEXT: %[[V32:[a-z0-9_]+]] = nn.linear %[[V31]], %[[V5]]#2
// HSDP-NEXT: dist.free %[[V2]] : tensor<1040xf32>
// HSDP-NEXT: %[[V33:[a-z0-9_]+]] = nn.cross_entropy %[[V32]], %arg1
// HSDP-NEXT: %[[V34:[a-z0-9_]+]] = dist.all_reduce_start %[[V33]] on @mesh axes = ["dp", "fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> !dist.future<tensor<f32>>
// HSDP-NEXT: %[[V35:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V32]], %arg1, %arg14 scale 3.125000e-02
// HSDP-NEXT: %[[V36:[a-z0-9_]+]] = dist.wait %[[V9]] : !dist.future<tensor<528xf32>>
// HSDP-NEXT: dist.free %[[V8]] : tensor<264xf32>
// HSDP-NEXT: %[[V37:[a-z0-9_]+]] = dist.bucket %arg11, %arg10, %arg9, %arg8, %arg7, %arg6, %arg5, %arg4, %arg3 offsets = [0, 192, 384, 576, 584, 712, 776, 840, 968] : tensor<12x16xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32> -> tensor<976xf32>
// HSDP-NEXT: %[[V38:[a-z0-9_]+]] = dist.all_gather_start %[[V37]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<976xf32> -> !dist.future<tensor<1952xf32>>
// HSDP-NEXT: %[[V39:[a-z0-9_]+]]:2 = dist.unbucket %[[V36]] offsets = [0, 256] chunks = 2 : tensor<528xf32> -> tensor<16x32xf32>, tensor<16xf32>
// HSDP-NEXT: %[[V40:[a-z0-9_]+]] = nn.matmul %[[V35]], %[[V39]]#0 transpose_rhs
// HSDP-NEXT: %[[V41:[a-z0-9_]+]] = nn.matmul %[[V31]], %[[V35]] transpose_lhs
// HSDP-NEXT: %[[V42:[a-z0-9_]+]], %[[V43:[a-z0-9_]+]] = nn.rms_norm_grad %[[V30]], %[[V39]]#1, %[[V40]] epsilon 1.000000e-05
// HSDP-NEXT: dist.free %[[V36]] : tensor<528xf32>
// HSDP-NEXT: %[[V44:[a-z0-9_]+]] = dist.wait %[[V38]] : !dist.future<tensor<1952xf32>>
// HSDP-NEXT: dist.free %[[V37]] : tensor<976xf32>
// HSDP-NEXT: %[[V45:[a-z0-9_]+]]:9 = dist.unbucket %[[V44]] offsets = [0, 192, 384, 576, 584, 712, 776, 840, 968] chunks = 2 : tensor<1952xf32> -> tensor<24x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32>
// HSDP-NEXT: %[[V46:[a-z0-9_]+]] = nn.matmul %[[V42]], %[[V45]]#0 transpose_rhs
// HSDP-NEXT: %[[V47:[a-z0-9_]+]] = nn.matmul %[[V28]], %[[V42]] transpose_lhs
// HSDP-NEXT: %[[V48:[a-z0-9_]+]] = nn.mul %[[V46]], %[[V26]]
// HSDP-NEXT: %[[V49:[a-z0-9_]+]] = nn.mul %[[V46]], %[[V27]]
// HSDP-NEXT: %[[V50:[a-z0-9_]+]] = nn.silu_grad %[[V25]], %[[V48]]
// HSDP-NEXT: %[[V51:[a-z0-9_]+]] = nn.matmul %[[V49]], %[[V45]]#1 transpose_rhs
// HSDP-NEXT: %[[V52:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V49]] transpose_lhs
// HSDP-NEXT: %[[V53:[a-z0-9_]+]] = nn.matmul %[[V50]], %[[V45]]#2 transpose_rhs
// HSDP-NEXT: %[[V54:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V50]] transpose_lhs
// HSDP-NEXT: %[[V55:[a-z0-9_]+]] = nn.add %[[V51]], %[[V53]]
// HSDP-NEXT: %[[V56:[a-z0-9_]+]], %[[V57:[a-z0-9_]+]] = nn.rms_norm_grad %[[V23]], %[[V45]]#3, %[[V55]] epsilon 1.000000e-05
// HSDP-NEXT: %[[V58:[a-z0-9_]+]] = nn.add %[[V42]], %[[V56]]
// HSDP-NEXT: %[[V59:[a-z0-9_]+]] = nn.matmul %[[V58]], %[[V45]]#4 transpose_rhs
// HSDP-NEXT: %[[V60:[a-z0-9_]+]] = nn.matmul %[[V21]], %[[V58]] transpose_lhs
// HSDP-NEXT: %[[V61:[a-z0-9_]+]] = nn.reshape %[[V59]]
// HSDP-NEXT: %[[V62:[a-z0-9_]+]], %[[V63:[a-z0-9_]+]], %[[V64:[a-z0-9_]+]] = nn.attention_grad %[[V18]], %[[V19]], %[[V17]], %[[V61]]
// HSDP-NEXT: %[[V65:[a-z0-9_]+]] = nn.rope %[[V63]] theta 1.000000e+04 inverse
// HSDP-NEXT: %[[V66:[a-z0-9_]+]] = nn.rope %[[V62]] theta 1.000000e+04 inverse
// HSDP-NEXT: %[[V67:[a-z0-9_]+]] = nn.reshape %[[V64]]
// HSDP-NEXT: %[[V68:[a-z0-9_]+]] = nn.reshape %[[V65]]
// HSDP-NEXT: %[[V69:[a-z0-9_]+]] = nn.reshape %[[V66]]
// HSDP-NEXT: %[[V70:[a-z0-9_]+]] = nn.matmul %[[V67]], %[[V45]]#5 transpose_rhs
// HSDP-NEXT: %[[V71:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V67]] transpose_lhs
// HSDP-NEXT: %[[V72:[a-z0-9_]+]] = nn.matmul %[[V68]], %[[V45]]#6 transpose_rhs
// HSDP-NEXT: %[[V73:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V68]] transpose_lhs
// HSDP-NEXT: %[[V74:[a-z0-9_]+]] = nn.add %[[V70]], %[[V72]]
// HSDP-NEXT: %[[V75:[a-z0-9_]+]] = nn.matmul %[[V69]], %[[V45]]#7 transpose_rhs
// HSDP-NEXT: %[[V76:[a-z0-9_]+]] = nn.matmul %[[V11]], %[[V69]] transpose_lhs
// HSDP-NEXT: %[[V77:[a-z0-9_]+]] = nn.add %[[V74]], %[[V75]]
// HSDP-NEXT: %[[V78:[a-z0-9_]+]], %[[V79:[a-z0-9_]+]] = nn.rms_norm_grad %[[V6]], %[[V45]]#8, %[[V77]] epsilon 1.000000e-05
// HSDP-NEXT: dist.free %[[V44]] : tensor<1952xf32>
// HSDP-NEXT: %[[V80:[a-z0-9_]+]] = dist.bucket %[[V47]], %[[V52]], %[[V54]], %[[V57]], %[[V60]], %[[V71]], %[[V73]], %[[V76]], %[[V79]] offsets = [0, 192, 384, 576, 584, 712, 776, 840, 968] chunks = 2 : tensor<24x16xf32>, tensor<16x24xf32>, tensor<16x24xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<16xf32> -> tensor<1952xf32>
// HSDP-NEXT: %[[V81:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V80]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<1952xf32> -> !dist.future<tensor<976xf32>>
// HSDP-NEXT: %[[V82:[a-z0-9_]+]] = nn.add %[[V58]], %[[V78]]
// HSDP-NEXT: %[[V83:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V82]]
// HSDP-NEXT: %[[V84:[a-z0-9_]+]] = dist.wait %[[V81]] : !dist.future<tensor<976xf32>>
// HSDP-NEXT: dist.free %[[V80]] : tensor<1952xf32>
// HSDP-NEXT: %[[V85:[a-z0-9_]+]] = dist.all_reduce_start %[[V84]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<976xf32> -> !dist.future<tensor<976xf32>>
// HSDP-NEXT: %[[V86:[a-z0-9_]+]] = dist.bucket %[[V41]], %[[V43]], %[[V83]] offsets = [0, 256, 264] chunks = 2 : tensor<16x32xf32>, tensor<16xf32>, tensor<32x16xf32> -> tensor<1040xf32>
// HSDP-NEXT: %[[V87:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V86]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<1040xf32> -> !dist.future<tensor<520xf32>>
// HSDP-NEXT: %[[V88:[a-z0-9_]+]] = dist.wait %[[V87]] : !dist.future<tensor<520xf32>>
// HSDP-NEXT: dist.free %[[V86]] : tensor<1040xf32>
// HSDP-NEXT: %[[V89:[a-z0-9_]+]] = dist.all_reduce_start %[[V88]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<520xf32> -> !dist.future<tensor<520xf32>>
// HSDP-NEXT: %[[V90:[a-z0-9_]+]] = dist.wait %[[V89]] : !dist.future<tensor<520xf32>>
// HSDP-NEXT: %[[V91:[a-z0-9_]+]]:3 = dist.unbucket %[[V90]] offsets = [0, 256, 264] : tensor<520xf32> -> tensor<8x32xf32>, tensor<8xf32>, tensor<16x16xf32>
// HSDP-NEXT: %[[V92:[a-z0-9_]+]] = dist.wait %[[V85]] : !dist.future<tensor<976xf32>>
// HSDP-NEXT: %[[V93:[a-z0-9_]+]]:9 = dist.unbucket %[[V92]] offsets = [0, 192, 384, 576, 584, 712, 776, 840, 968] : tensor<976xf32> -> tensor<12x16xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32>
// HSDP-NEXT: %[[V94:[a-z0-9_]+]] = dist.wait %[[V34]] : !dist.future<tensor<f32>>
// HSDP-NEXT: return %[[V94]], %[[V91]]#2, %[[V93]]#8, %[[V93]]#7, %[[V93]]#6, %[[V93]]#5, %[[V93]]#4, %[[V93]]#3, %[[V93]]#2, %[[V93]]#1, %[[V93]]#0, %[[V91]]#1, %[[V91]]#0 : tensor<f32>, tensor<16x16xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8x24xf32>, tensor<8x24xf32>, tensor<12x16xf32>, tensor<8xf32>, tensor<8x32xf32>
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

// Tests the HSDP overlap of the dp all-reduce on a 3-unit MLP (one parameter
// per unit): the reduce-scatter of layers.2 overlaps the backward of
// layers.1; its dp all-reduce starts right after its wait and completes just
// before the reduction after next, overlapping the backward of layers.0
// (and the reduce-scatter of layers.1). The last reduction completes in
// place; the second to last one completes at the return.
// HSDP-LABEL: func.func @mlp3(
// HSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather_start %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> !dist.future<tensor<16x16xf32>>
// HSDP-NEXT: %[[V1:[a-z0-9_]+]] = dist.wait %[[V0]] : !dist.future<tensor<16x16xf32>>
// HSDP-NEXT: %[[V2:[a-z0-9_]+]] = dist.all_gather_start %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> !dist.future<tensor<16x16xf32>>
// HSDP-NEXT: %[[V3:[a-z0-9_]+]] = nn.linear %arg0, %[[V1]]
// HSDP-NEXT: dist.free %[[V1]] : tensor<16x16xf32>
// HSDP-NEXT: %[[V4:[a-z0-9_]+]] = nn.silu %[[V3]]
// HSDP-NEXT: %[[V5:[a-z0-9_]+]] = dist.wait %[[V2]] : !dist.future<tensor<16x16xf32>>
// HSDP-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_gather_start %arg4 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> !dist.future<tensor<16x12xf32>>
// HSDP-NEXT: %[[V7:[a-z0-9_]+]] = nn.linear %[[V4]], %[[V5]]
// HSDP-NEXT: dist.free %[[V5]] : tensor<16x16xf32>
// HSDP-NEXT: %[[V8:[a-z0-9_]+]] = nn.silu %[[V7]]
// HSDP-NEXT: %[[V9:[a-z0-9_]+]] = dist.wait %[[V6]] : !dist.future<tensor<16x12xf32>>
// HSDP-NEXT: %[[V10:[a-z0-9_]+]] = dist.all_gather_start %arg4 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> !dist.future<tensor<16x12xf32>>
// HSDP-NEXT: %[[V11:[a-z0-9_]+]] = nn.linear %[[V8]], %[[V9]]
// HSDP-NEXT: dist.free %[[V9]] : tensor<16x12xf32>
// HSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.cross_entropy %[[V11]], %arg1
// HSDP-NEXT: %[[V13:[a-z0-9_]+]] = dist.all_reduce_start %[[V12]] on @mesh axes = ["dp", "fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> !dist.future<tensor<f32>>
// HSDP-NEXT: %[[V14:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V11]], %arg1, %arg5 scale 1.250000e-01
// HSDP-NEXT: %[[V15:[a-z0-9_]+]] = dist.wait %[[V10]] : !dist.future<tensor<16x12xf32>>
// HSDP-NEXT: %[[V16:[a-z0-9_]+]] = dist.all_gather_start %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> !dist.future<tensor<16x16xf32>>
// HSDP-NEXT: %[[V17:[a-z0-9_]+]] = nn.matmul %[[V14]], %[[V15]] transpose_rhs
// HSDP-NEXT: dist.free %[[V15]] : tensor<16x12xf32>
// HSDP-NEXT: %[[V18:[a-z0-9_]+]] = nn.matmul %[[V8]], %[[V14]] transpose_lhs
// HSDP-NEXT: %[[V19:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V18]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> !dist.future<tensor<8x12xf32>>
// HSDP-NEXT: %[[V20:[a-z0-9_]+]] = nn.silu_grad %[[V7]], %[[V17]]
// HSDP-NEXT: %[[V21:[a-z0-9_]+]] = dist.wait %[[V16]] : !dist.future<tensor<16x16xf32>>
// HSDP-NEXT: %[[V22:[a-z0-9_]+]] = nn.matmul %[[V20]], %[[V21]] transpose_rhs
// HSDP-NEXT: dist.free %[[V21]] : tensor<16x16xf32>
// HSDP-NEXT: %[[V23:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V20]] transpose_lhs
// HSDP-NEXT: %[[V24:[a-z0-9_]+]] = dist.wait %[[V19]] : !dist.future<tensor<8x12xf32>>
// HSDP-NEXT: %[[V25:[a-z0-9_]+]] = dist.all_reduce_start %[[V24]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<8x12xf32> -> !dist.future<tensor<8x12xf32>>
// HSDP-NEXT: %[[V26:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V23]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> !dist.future<tensor<8x16xf32>>
// HSDP-NEXT: %[[V27:[a-z0-9_]+]] = nn.silu_grad %[[V3]], %[[V22]]
// HSDP-NEXT: %[[V28:[a-z0-9_]+]] = nn.matmul %arg0, %[[V27]] transpose_lhs
// HSDP-NEXT: %[[V29:[a-z0-9_]+]] = dist.wait %[[V25]] : !dist.future<tensor<8x12xf32>>
// HSDP-NEXT: %[[V30:[a-z0-9_]+]] = dist.wait %[[V26]] : !dist.future<tensor<8x16xf32>>
// HSDP-NEXT: %[[V31:[a-z0-9_]+]] = dist.all_reduce_start %[[V30]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> !dist.future<tensor<8x16xf32>>
// HSDP-NEXT: %[[V32:[a-z0-9_]+]] = dist.reduce_scatter_start %[[V28]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> !dist.future<tensor<8x16xf32>>
// HSDP-NEXT: %[[V33:[a-z0-9_]+]] = dist.wait %[[V32]] : !dist.future<tensor<8x16xf32>>
// HSDP-NEXT: %[[V34:[a-z0-9_]+]] = dist.all_reduce_start %[[V33]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> !dist.future<tensor<8x16xf32>>
// HSDP-NEXT: %[[V35:[a-z0-9_]+]] = dist.wait %[[V34]] : !dist.future<tensor<8x16xf32>>
// HSDP-NEXT: %[[V36:[a-z0-9_]+]] = dist.wait %[[V31]] : !dist.future<tensor<8x16xf32>>
// HSDP-NEXT: %[[V37:[a-z0-9_]+]] = dist.wait %[[V13]] : !dist.future<tensor<f32>>
// HSDP-NEXT: return %[[V37]], %[[V35]], %[[V36]], %[[V29]] : tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x12xf32>
func.func @mlp3(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc.weight"},
    %w1: tensor<16x16xf32> {nn.param, nn.name = "layers.1.fc.weight"},
    %w2: tensor<16x12xf32> {nn.param, nn.name = "layers.2.fc.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a0 = nn.silu %h0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h1 = nn.linear %a0, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a1 = nn.silu %h1 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a1, %w2 : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
