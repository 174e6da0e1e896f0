// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=2,tp=2 axes=fsdp,tp sequence-parallel=true" --plan-insert-collectives --plan-bucketing --plan-verify-spmd | FileCheck %s
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=2,tp=2 axes=fsdp,tp sequence-parallel=true" --plan-insert-collectives --plan-bucketing --plan-schedule="prefetch=0" --plan-verify-spmd | FileCheck %s --check-prefix=SCHED

// Bucketing under fsdp x tp with sequence parallelism (one Llama block of
// the zoo: plan --model=tiny:family=llama,layers=1,hidden=16,heads=2,
// kv_heads=2,ffn=32,vocab=32,seq=8 --batch=2 --seq=8 --emit=graph). The
// norms' weight gradients are partial over the sequence shards: each is
// reduce-scattered on fsdp and its shard then all-reduced on tp. They join
// their unit's fsdp bucket like every other gradient (one reduce-scatter
// per unit, not one per norm), and the shards that need the tp all-reduce
// are packed into one small bucket after it. The root unit has a single
// such shard (the final norm), which is all-reduced directly.

// CHECK-LABEL: func.func @tiny
// The final norm's gradient first, then the block's two; the block's
// backward ends in one fsdp bucket with both norm gradients in it.
// CHECK: %{{.+}}, %[[GAMMA0:[a-z_0-9]+]] = nn.rms_norm_grad
// CHECK: %{{.+}}, %[[GAMMA1:[a-z_0-9]+]] = nn.rms_norm_grad
// CHECK: %{{.+}}, %[[GAMMA2:[a-z_0-9]+]] = nn.rms_norm_grad
// CHECK-NOT: dist.reduce_scatter {{.+}} axes = ["fsdp"]
// CHECK: %[[BUCKET:.+]] = dist.bucket %{{.+}}, %{{.+}}, %{{.+}}, %[[GAMMA1]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[GAMMA2]] offsets = [0, 128, 256, 384, 392, 456, 520, 584, 648] chunks = 2
// CHECK-NEXT: %[[SCATTERED:.+]] = dist.reduce_scatter %[[BUCKET]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum
// CHECK-NEXT: dist.free %[[BUCKET]]
// Each shard is placed as its gradient is returned (row-parallel weights:
// fsdp on dim 1), the norms' partial on tp until their all-reduce.
// CHECK-NEXT: %[[SHARDS:.+]]:9 = dist.unbucket %[[SCATTERED]] offsets = [0, 128, 256, 384, 392, 456, 520, 584, 648] {dist.result_placements = [#dist.placement<@mesh, [shard<1>, shard<0>]>, {{.+}}, #dist.placement<@mesh, [shard<0>, partial<sum>]>, {{.+}}, #dist.placement<@mesh, [shard<0>, partial<sum>]>]} :
// CHECK-NEXT: %[[NORMS:.+]] = dist.bucket %[[SHARDS]]#3, %[[SHARDS]]#8 offsets = [0, 8] : tensor<8xf32>, tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[SUMMED:.+]] = dist.all_reduce %[[NORMS]] on @mesh axes = ["tp"] reduction = sum
// CHECK-NEXT: dist.free %[[NORMS]]
// CHECK-NEXT: %[[NORM_SHARDS:.+]]:2 = dist.unbucket %[[SUMMED]] offsets = [0, 8] {dist.result_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [shard<0>, replicate]>]} : tensor<16xf32> -> tensor<8xf32>, tensor<8xf32>
// The root unit: embedding, final norm and head in one fsdp bucket; the
// final norm's shard alone is all-reduced on tp.
// CHECK: nn.embedding_grad
// CHECK-NEXT: %[[ROOT:.+]] = dist.bucket %{{.+}}, %[[GAMMA0]], %{{.+}} offsets = [0, 128, 136] chunks = 2
// CHECK-NEXT: %[[ROOT_SCATTERED:.+]] = dist.reduce_scatter %[[ROOT]] on @mesh axes = ["fsdp"]
// CHECK-NEXT: dist.free %[[ROOT]]
// CHECK-NEXT: %[[ROOT_SHARDS:.+]]:3 = dist.unbucket %[[ROOT_SCATTERED]]
// CHECK-NEXT: %[[FINAL_NORM:.+]] = dist.all_reduce %[[ROOT_SHARDS]]#1 on @mesh axes = ["tp"] reduction = sum
// CHECK-NOT: dist.reduce_scatter {{.+}} axes = ["fsdp"]
// CHECK: return %{{.+}}, %[[ROOT_SHARDS]]#2, %[[NORM_SHARDS]]#1, {{.+}}, %[[NORM_SHARDS]]#0, {{.+}}, %[[FINAL_NORM]], %[[ROOT_SHARDS]]#0

// The schedule overlaps both steps of each chain with the next compute:
// the block's reduce-scatter runs under the embedding's gradient, its norm
// all-reduce under the root's reduce-scatter, and waits come only where
// the results are needed (the root's own chain, then the return).
// SCHED-LABEL: func.func @tiny
// SCHED: %[[RS:.+]] = dist.reduce_scatter_start %{{.+}} on @mesh axes = ["fsdp"]
// SCHED: nn.embedding_grad
// SCHED-NEXT: %[[RS_DONE:.+]] = dist.wait %[[RS]]
// SCHED: dist.unbucket %[[RS_DONE]]
// SCHED-NEXT: dist.bucket
// SCHED-NEXT: %[[AR:.+]] = dist.all_reduce_start %{{.+}} on @mesh axes = ["tp"]
// SCHED-NEXT: dist.bucket
// SCHED-NEXT: %[[ROOT_RS:.+]] = dist.reduce_scatter_start %{{.+}} on @mesh axes = ["fsdp"]
// SCHED-NEXT: dist.wait %[[ROOT_RS]]
// SCHED: dist.all_reduce_start %{{.+}} on @mesh axes = ["tp"]
// SCHED-NEXT: dist.wait
// SCHED-NEXT: %[[AR_DONE:.+]] = dist.wait %[[AR]]
// SCHED: dist.unbucket %[[AR_DONE]]
// SCHED: return

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

