// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives="grad-reduce-dtype=f32" | FileCheck %s --check-prefix=FSDP
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives | FileCheck %s --check-prefix=DEFAULT
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=dp=2 axes=dp" --plan-insert-collectives="grad-reduce-dtype=f32" | FileCheck %s --check-prefix=DP
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=dp=2,fsdp=2 axes=dp,fsdp" --plan-insert-collectives="grad-reduce-dtype=f32" | FileCheck %s --check-prefix=HSDP
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=tp=2 axes=tp" --plan-insert-collectives="grad-reduce-dtype=f32" | FileCheck %s --check-prefix=TP
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives="grad-reduce-dtype=bf16" | FileCheck %s --check-prefix=NARROW
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives="wire-dtype=bf16 grad-reduce-dtype=f32" | FileCheck %s --check-prefix=WIRE
// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives="reduce-dtype=f64 grad-reduce-dtype=bf16" | FileCheck %s --check-prefix=ACCUM
// RUN: not plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives="grad-reduce-dtype=f64" 2>&1 | FileCheck %s --check-prefix=BADF64
// RUN: not plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives="grad-reduce-dtype=fp32" 2>&1 | FileCheck %s --check-prefix=BADNAME

// grad-reduce-dtype=T (FSDP2's reduce_dtype): the reductions of parameter
// gradients travel as T, accumulate in the wider of T and reduce-dtype and
// yield T, and the function's gradient results follow. Every other
// reduction (the loss, tensor-parallel partial sums) keeps wire-dtype,
// reduce-dtype and its element type. A gradient that needs no reduction
// (tp-local) keeps its type.

// Tests the exact fsdp=2 step of a bf16 MLP with f32 gradient reduction:
// bf16 gathers, the f32 loss all-reduce as before, each gradient
// reduce-scattered from bf16 to an f32 shard, f32 gradient results.
// FSDP-LABEL: func.func @mlp(
// FSDP-SAME: -> (tensor<f32> {{.*}}, tensor<8x16xf32> {{.*}}nn.grad_of = 2{{.*}}, tensor<8x12xf32> {{.*}}nn.grad_of = 3
// FSDP-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = bf16 : tensor<8x16xbf16> -> tensor<16x16xbf16>
// FSDP-NEXT: %[[V1:[a-z0-9_]+]] = nn.linear %arg0, %[[V0]]
// FSDP-NEXT: dist.free %[[V0]] : tensor<16x16xbf16>
// FSDP-NEXT: %[[V2:[a-z0-9_]+]] = nn.silu %[[V1]]
// FSDP-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = bf16 : tensor<8x12xbf16> -> tensor<16x12xbf16>
// FSDP-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %[[V2]], %[[V3]]
// FSDP-NEXT: dist.free %[[V3]] : tensor<16x12xbf16>
// FSDP-NEXT: %[[V5:[a-z0-9_]+]] = nn.cross_entropy %[[V4]], %arg1
// FSDP-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_reduce %[[V5]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// FSDP-NEXT: %[[V7:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V4]], %arg1, %arg4 scale 1.250000e-01
// FSDP-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = bf16 : tensor<8x12xbf16> -> tensor<16x12xbf16>
// FSDP-NEXT: %[[V9:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V8]] transpose_rhs
// FSDP-NEXT: dist.free %[[V8]] : tensor<16x12xbf16>
// FSDP-NEXT: %[[V10:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V7]] transpose_lhs
// FSDP-NEXT: %[[V11:[a-z0-9_]+]] = dist.reduce_scatter %[[V10]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xbf16> -> tensor<8x12xf32>
// FSDP-NEXT: %[[V12:[a-z0-9_]+]] = nn.silu_grad %[[V1]], %[[V9]]
// FSDP-NEXT: %[[V13:[a-z0-9_]+]] = nn.matmul %arg0, %[[V12]] transpose_lhs
// FSDP-NEXT: %[[V14:[a-z0-9_]+]] = dist.reduce_scatter %[[V13]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xbf16> -> tensor<8x16xf32>
// FSDP-NEXT: return %[[V6]], %[[V14]], %[[V11]] : tensor<f32>, tensor<8x16xf32>, tensor<8x12xf32>

// Tests that without the option bf16 gradients travel and stay bf16 (f32
// accumulation), as before.
// DEFAULT-LABEL: func.func @mlp(
// DEFAULT: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x12xbf16> -> tensor<8x12xbf16>
// DEFAULT: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x16xbf16> -> tensor<8x16xbf16>
// DEFAULT: return %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : tensor<f32>, tensor<8x16xbf16>, tensor<8x12xbf16>

// Tests dp=2: each gradient all-reduce widens to a replicated f32 gradient;
// the loss's all-reduce is unchanged.
// DP-LABEL: func.func @mlp(
// DP-SAME: -> (tensor<f32> {{.*}}, tensor<16x16xf32> {{.*}}nn.grad_of = 2{{.*}}, tensor<16x12xf32> {{.*}}nn.grad_of = 3
// DP: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["dp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// DP: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<16x12xbf16> -> tensor<16x12xf32>
// DP: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<16x16xbf16> -> tensor<16x16xf32>
// DP: return %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : tensor<f32>, tensor<16x16xf32>, tensor<16x12xf32>

// Tests HSDP (dp=2 x fsdp=2): the reduce-scatter over fsdp widens, and the
// all-reduce over dp reduces the f32 shard in f32.
// HSDP-LABEL: func.func @mlp(
// HSDP: %[[S0:[0-9]+]] = dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xbf16> -> tensor<8x12xf32>
// HSDP-NEXT: dist.all_reduce %[[S0]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<8x12xf32> -> tensor<8x12xf32>
// HSDP: %[[S1:[0-9]+]] = dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xbf16> -> tensor<8x16xf32>
// HSDP-NEXT: dist.all_reduce %[[S1]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<8x16xf32>
// HSDP: return %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : tensor<f32>, tensor<8x16xf32>, tensor<8x12xf32>

// Tests narrowing on the bf16 step: bf16 on the wire, f32 accumulation, a
// bf16 result (the same collectives as without the option).
// NARROW-LABEL: func.func @mlp(
// NARROW: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x12xbf16> -> tensor<8x12xbf16>

// Tests that wire-dtype still applies to the loss while gradients follow
// grad-reduce-dtype.
// WIRE-LABEL: func.func @mlp(
// WIRE: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["fsdp"] reduction = avg wire = bf16 accum = f32 : tensor<f32> -> tensor<f32>
// WIRE: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xbf16> -> tensor<8x12xf32>

// Tests that the gradients accumulate in reduce-dtype when it is wider.
// ACCUM-LABEL: func.func @mlp(
// ACCUM: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f64 : tensor<16x12xbf16> -> tensor<8x12xbf16>

// Tests that f64 and unknown names are refused, naming the allowed types.
// BADF64: error: invalid grad-reduce-dtype=f64; use bf16, f16 or f32, or leave it empty to keep the gradient's type
// BADNAME: error: invalid grad-reduce-dtype=fp32; use bf16, f16 or f32, or leave it empty to keep the gradient's type
func.func @mlp(%x: tensor<8x16xbf16>, %labels: tensor<8xi32>,
    %w1: tensor<16x16xbf16> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<16x12xbf16> {nn.param, nn.name = "head.weight"}) -> tensor<f32> {
  %h = nn.linear %x, %w1 : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  %a = nn.silu %h : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %y = nn.linear %a, %w2 : (tensor<8x16xbf16>, tensor<16x12xbf16>) -> tensor<8x12xbf16>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xbf16>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests narrowing f32 gradients: bf16 on the wire, f32 accumulation, bf16
// gradient shards; the f32 loss is reduced in f32 as before.
// NARROW-LABEL: func.func @mlp_f32(
// NARROW-SAME: -> (tensor<f32> {{.*}}, tensor<8x16xbf16> {{.*}}nn.grad_of = 2{{.*}}, tensor<8x12xbf16> {{.*}}nn.grad_of = 3
// NARROW: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// NARROW: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x12xf32> -> tensor<8x12xbf16>
// NARROW: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x16xf32> -> tensor<8x16xbf16>
// NARROW: return %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : tensor<f32>, tensor<8x16xbf16>, tensor<8x12xbf16>

// Tests that f32 gradients under grad-reduce-dtype=f32 reduce as before.
// FSDP-LABEL: func.func @mlp_f32(
// FSDP: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>

// Tests that reduce-dtype=f64 accumulates narrowed gradients in f64.
// ACCUM-LABEL: func.func @mlp_f32(
// ACCUM: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f64 : tensor<16x12xf32> -> tensor<8x12xbf16>
func.func @mlp_f32(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w1: tensor<16x16xf32> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<16x12xf32> {nn.param, nn.name = "head.weight"}) -> tensor<f32> {
  %h = nn.linear %x, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a = nn.silu %h : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a, %w2 : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests tp=2 on a 3-layer bf16 MLP: the activation all-reduces (fc2's
// partial sums forward, the head's input gradient backward) stay bf16 on the
// wire with bf16 results, the vocab-parallel loss's stay f32, and the
// tp-local gradients, which need no reduction, stay bf16.
// TP-LABEL: func.func @tp_mlp(
// TP-SAME: -> (tensor<f32> {{.*}}, tensor<16x16xbf16> {{.*}}nn.grad_of = 2{{.*}}, tensor<16x16xbf16> {{.*}}nn.grad_of = 3{{.*}}, tensor<16x6xbf16> {{.*}}nn.grad_of = 4
// TP: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["tp"] reduction = sum wire = bf16 accum = f32 : tensor<8x16xbf16> -> tensor<8x16xbf16>
// TP: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["tp"] reduction = max wire = f32 accum = f32 : tensor<8xf32> -> tensor<8xf32>
// TP: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<8x2xf32> -> tensor<8x2xf32>
// TP: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["tp"] reduction = sum wire = bf16 accum = f32 : tensor<8x16xbf16> -> tensor<8x16xbf16>
// TP-NOT: dist.all_reduce
// TP-NOT: dist.reduce_scatter
// TP: return %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : tensor<f32>, tensor<16x16xbf16>, tensor<16x16xbf16>, tensor<16x6xbf16>
func.func @tp_mlp(%x: tensor<8x16xbf16>, %labels: tensor<8xi32>,
    %w1: tensor<16x32xbf16> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<32x16xbf16> {nn.param, nn.name = "fc2.weight"},
    %w3: tensor<16x12xbf16> {nn.param, nn.name = "head.weight"}) -> tensor<f32> {
  %h = nn.linear %x, %w1 : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
  %a = nn.silu %h : (tensor<8x32xbf16>) -> tensor<8x32xbf16>
  %o = nn.linear %a, %w2 : (tensor<8x32xbf16>, tensor<32x16xbf16>) -> tensor<8x16xbf16>
  %y = nn.linear %o, %w3 : (tensor<8x16xbf16>, tensor<16x12xbf16>) -> tensor<8x12xbf16>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xbf16>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

