// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=tp=2 axes=tp sequence-parallel=true" --plan-insert-collectives | FileCheck %s
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=tp=2 axes=tp" --plan-insert-collectives | FileCheck %s --check-prefix=NOSP

// Megatron sequence parallelism on one Llama block and one GPT-2 block
// (the zoo's graphs: plan --model=tiny:family=F,layers=1,hidden=16,heads=2,
// kv_heads=2,ffn=32,vocab=32,seq=8 --batch=2 --seq=8 --emit=graph). The
// residual stream and the norms live on sequence shards: the
// vocab-parallel embedding's partial sum and every row-parallel output are
// reduce-scattered into them, and each column-parallel op (q/k/v, the
// MLP's first linears, the head) gathers them back. Without it, each of
// those is one all-reduce. In the backward the pattern mirrors: an
// all-gather of the gradient before each row-parallel op's input
// gradient, a reduce-scatter after each column-parallel one, and the norm
// parameters' gradients (summed over sequence shards) all-reduced.

// CHECK-LABEL: func.func @tiny
// CHECK: nn.embedding
// CHECK-NEXT: dist.reduce_scatter %{{.+}} on @mesh axes = ["tp"] scatter_dim = 1 reduction = sum
// CHECK-NEXT: nn.rms_norm
// CHECK-NEXT: dist.all_gather %{{.+}} on @mesh axes = ["tp"] gather_dim = 1
// CHECK: nn.attention
// CHECK: nn.add
// CHECK-NEXT: dist.reduce_scatter %{{.+}} scatter_dim = 1 reduction = sum
// CHECK-NEXT: nn.rms_norm
// CHECK-NEXT: dist.all_gather %{{.+}} gather_dim = 1
// CHECK: nn.silu
// CHECK: nn.add
// CHECK-NEXT: dist.reduce_scatter %{{.+}} scatter_dim = 1 reduction = sum
// CHECK-NEXT: nn.rms_norm
// CHECK-NEXT: dist.all_gather %{{.+}} gather_dim = 1
// CHECK-NEXT: nn.linear
// CHECK-NEXT: nn.vocab_max
// CHECK: nn.vocab_cross_entropy_grad
// CHECK: dist.reduce_scatter %{{.+}} scatter_dim = 1 reduction = sum
// CHECK: nn.rms_norm_grad
// CHECK-NEXT: dist.all_reduce %gamma_grad on @mesh axes = ["tp"] reduction = sum
// CHECK-NEXT: dist.all_gather %input_grad on @mesh axes = ["tp"] gather_dim = 1
// CHECK-NOT: dist.all_to_all
// CHECK: return

// NOSP-LABEL: func.func @tiny
// NOSP-NOT: dist.reduce_scatter
// NOSP-NOT: dist.all_gather
// NOSP: dist.all_reduce
// NOSP-NOT: dist.reduce_scatter
// NOSP: return

func.func @tiny(%arg0: tensor<2x8xi32>, %arg1: tensor<2x8xi32>, %arg2: tensor<32x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "tok_embeddings.weight", nn.param}, %arg3: tensor<16xf32> {nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "layers.0.attention_norm.weight", nn.param}, %arg4: tensor<16x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "layers.0.attention.wq.weight", nn.param}, %arg5: tensor<16x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "layers.0.attention.wk.weight", nn.param}, %arg6: tensor<16x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "layers.0.attention.wv.weight", nn.param}, %arg7: tensor<16x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "layers.0.attention.wo.weight", nn.param}, %arg8: tensor<16xf32> {nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "layers.0.ffn_norm.weight", nn.param}, %arg9: tensor<16x32xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "layers.0.feed_forward.w1.weight", nn.param}, %arg10: tensor<32x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "layers.0.feed_forward.w2.weight", nn.param}, %arg11: tensor<16x32xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "layers.0.feed_forward.w3.weight", nn.param}, %arg12: tensor<16xf32> {nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "norm.weight", nn.param}, %arg13: tensor<16x32xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "output.weight", nn.param}) -> tensor<f32> {
  %0 = nn.embedding %arg0, %arg2 : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %1 = nn.rms_norm %0, %arg3 epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %2 = nn.linear %1, %arg4 : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %3 = nn.reshape %2 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %4 = nn.linear %1, %arg5 : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %5 = nn.reshape %4 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %6 = nn.linear %1, %arg6 : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %7 = nn.reshape %6 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %8 = nn.rope %3 theta 1.000000e+04 : (tensor<2x8x2x8xf32>) -> tensor<2x8x2x8xf32>
  %9 = nn.rope %5 theta 1.000000e+04 : (tensor<2x8x2x8xf32>) -> tensor<2x8x2x8xf32>
  %10 = nn.attention %8, %9, %7 : (tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>) -> tensor<2x8x2x8xf32>
  %11 = nn.reshape %10 : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %12 = nn.linear %11, %arg7 : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %13 = nn.add %0, %12 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %14 = nn.rms_norm %13, %arg8 epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %15 = nn.linear %14, %arg9 : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %16 = nn.silu %15 : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %17 = nn.linear %14, %arg11 : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %18 = nn.mul %16, %17 : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %19 = nn.linear %18, %arg10 : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %20 = nn.add %13, %19 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %21 = nn.rms_norm %20, %arg12 epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %22 = nn.linear %21, %arg13 : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %23 = nn.cross_entropy %22, %arg1 : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %23 : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @tiny
// CHECK: nn.add
// CHECK-NEXT: dist.reduce_scatter %{{.+}} scatter_dim = 1 reduction = sum
// CHECK-NEXT: nn.layer_norm
// CHECK-NEXT: dist.all_gather %{{.+}} gather_dim = 1
// CHECK: nn.attention
// CHECK: nn.linear
// CHECK-NEXT: dist.reduce_scatter %{{.+}} scatter_dim = 1 reduction = sum
// CHECK-NEXT: nn.bias_add
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.layer_norm
// CHECK-NEXT: dist.all_gather %{{.+}} gather_dim = 1
// CHECK: nn.gelu
// CHECK-NEXT: nn.linear
// CHECK-NEXT: dist.reduce_scatter %{{.+}} scatter_dim = 1 reduction = sum
// CHECK-NEXT: nn.bias_add
// CHECK-NEXT: nn.add
// CHECK-NEXT: nn.layer_norm
// CHECK-NEXT: dist.all_gather %{{.+}} gather_dim = 1
// CHECK: nn.vocab_cross_entropy_grad
// CHECK: nn.layer_norm_grad
// CHECK-NEXT: dist.all_reduce %gamma_grad on @mesh axes = ["tp"] reduction = sum
// CHECK-NEXT: dist.all_reduce %beta_grad on @mesh axes = ["tp"] reduction = sum
// CHECK-NEXT: dist.all_gather %input_grad on @mesh axes = ["tp"] gather_dim = 1
// CHECK-NOT: dist.all_to_all
// CHECK: return

// NOSP-LABEL: func.func @tiny
// NOSP-NOT: dist.reduce_scatter
// NOSP-NOT: dist.all_gather
// NOSP: return

func.func @tiny(%arg0: tensor<2x8xi32>, %arg1: tensor<2x8xi32>, %arg2: tensor<2x8xi32>, %arg3: tensor<32x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "transformer.wte.weight", nn.param}, %arg4: tensor<8x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "transformer.wpe.weight", nn.param}, %arg5: tensor<16xf32> {nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.ln_1.weight", nn.param}, %arg6: tensor<16xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.ln_1.bias", nn.param}, %arg7: tensor<16x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "transformer.h.0.attn.c_attn.weight[:, 0:16]", nn.param}, %arg8: tensor<16xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.attn.c_attn.bias[0:16]", nn.param}, %arg9: tensor<16x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "transformer.h.0.attn.c_attn.weight[:, 16:32]", nn.param}, %arg10: tensor<16xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.attn.c_attn.bias[16:32]", nn.param}, %arg11: tensor<16x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "transformer.h.0.attn.c_attn.weight[:, 32:48]", nn.param}, %arg12: tensor<16xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.attn.c_attn.bias[32:48]", nn.param}, %arg13: tensor<16x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "transformer.h.0.attn.c_proj.weight", nn.param}, %arg14: tensor<16xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.attn.c_proj.bias", nn.param}, %arg15: tensor<16xf32> {nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.ln_2.weight", nn.param}, %arg16: tensor<16xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.ln_2.bias", nn.param}, %arg17: tensor<16x32xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "transformer.h.0.mlp.c_fc.weight", nn.param}, %arg18: tensor<32xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.mlp.c_fc.bias", nn.param}, %arg19: tensor<32x16xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "transformer.h.0.mlp.c_proj.weight", nn.param}, %arg20: tensor<16xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.h.0.mlp.c_proj.bias", nn.param}, %arg21: tensor<16xf32> {nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.ln_f.weight", nn.param}, %arg22: tensor<16xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "transformer.ln_f.bias", nn.param}) -> tensor<f32> {
  %0 = nn.embedding %arg0, %arg3 : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %1 = nn.embedding %arg2, %arg4 : (tensor<2x8xi32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %2 = nn.add %0, %1 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %3 = nn.layer_norm %2, %arg5, %arg6 epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %4 = nn.linear %3, %arg7, %arg8 : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %5 = nn.reshape %4 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %6 = nn.linear %3, %arg9, %arg10 : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %7 = nn.reshape %6 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %8 = nn.linear %3, %arg11, %arg12 : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %9 = nn.reshape %8 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %10 = nn.attention %5, %7, %9 : (tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>) -> tensor<2x8x2x8xf32>
  %11 = nn.reshape %10 : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %12 = nn.linear %11, %arg13, %arg14 : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %13 = nn.add %2, %12 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %14 = nn.layer_norm %13, %arg15, %arg16 epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %15 = nn.linear %14, %arg17, %arg18 : (tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %16 = nn.gelu %15 : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %17 = nn.linear %16, %arg19, %arg20 : (tensor<2x8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %18 = nn.add %13, %17 : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %19 = nn.layer_norm %18, %arg21, %arg22 epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %20 = nn.matmul %19, %arg3 transpose_rhs : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %21 = nn.cross_entropy %20, %arg1 : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %21 : tensor<f32>
}
