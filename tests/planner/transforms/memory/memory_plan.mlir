// RUN: plan-opt %s -split-input-file --plan-optimizer-step --plan-memory-plan | FileCheck %s

dist.mesh @mesh shape = [2] axes = ["fsdp"]

// Tests that an fsdp=2 step records its peak: at the matmul, params 256 +
// AdamW moments 512 (added by plan-optimizer-step) + activations x, y, s,
// p (128 + 256 + 256 + 512); the gathered weight was freed before.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: plan.memory = {activation = 1152 : i64, gathered = 0 : i64, grad = 0 : i64, optimizer_state = 512 : i64, param = 256 : i64, peak_op = 4 : i64}
// CHECK-SAME: plan.peak_bytes = 1920 : i64
func.func @step(%x: tensor<4x8xf32>, %w: tensor<4x16xf32> {nn.param})
    -> (tensor<4x16xf32>, tensor<4x16xf32> {nn.grad_of = 1 : i64}) {
  %g = dist.all_gather %w on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<8x16xf32>
  %y = nn.linear %x, %g : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  dist.free %g : tensor<8x16xf32>
  %s = nn.silu %y : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %p = nn.matmul %x, %s transpose_lhs : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %r = dist.reduce_scatter %p on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<4x16xf32>
  return %y, %r : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"]

// Tests that optimizer-state arguments (a bf16 parameter's moments and f32
// master copy, as plan-optimizer-step adds them) are resident: 64 elements,
// params 128 + moments 2 * 256 + master 256; the peak is at the silu,
// which holds x and s (128 bytes each).
// CHECK-LABEL: func.func @bf16(
// CHECK-SAME: plan.memory = {activation = 256 : i64, gathered = 0 : i64, grad = 0 : i64, optimizer_state = 768 : i64, param = 128 : i64, peak_op = 0 : i64}
// CHECK-SAME: plan.peak_bytes = 1152 : i64
func.func @bf16(%x: tensor<4x16xbf16>, %w: tensor<4x16xbf16> {nn.param},
                %m: tensor<4x16xf32> {dist.optimizer_state = "exp_avg"},
                %v: tensor<4x16xf32> {dist.optimizer_state = "exp_avg_sq"},
                %master: tensor<4x16xf32> {dist.optimizer_state = "master"}) -> tensor<4x16xbf16> {
  %s = nn.silu %x : (tensor<4x16xbf16>) -> tensor<4x16xbf16>
  return %s : tensor<4x16xbf16>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"]

// Tests collective staging (docs/planner_memory.md). A bf16 sum accumulated
// in f32 receives every rank's segments: p 256 + r 128 + 256 received.
// CHECK-LABEL: func.func @wider_accumulation(
// CHECK-SAME: plan.memory = {activation = 640 : i64, gathered = 0 : i64, grad = 0 : i64, optimizer_state = 0 : i64, param = 0 : i64, peak_op = 0 : i64}
func.func @wider_accumulation(%p: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %r = dist.reduce_scatter %p on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<8x16xbf16> -> tensor<4x16xbf16>
  return %r : tensor<4x16xbf16>
}

// A bf16 operand on an f32 wire is converted first: p 256 + r 256 + the
// f32 copy 512.
// CHECK-LABEL: func.func @converted_operand(
// CHECK-SAME: plan.memory = {activation = 1024 : i64,
func.func @converted_operand(%p: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  %r = dist.reduce_scatter %p on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<8x16xbf16> -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// Max is exact in any type and goes to the engine: no staging, p + r.
// CHECK-LABEL: func.func @max_needs_none(
// CHECK-SAME: plan.memory = {activation = 512 : i64,
func.func @max_needs_none(%p: tensor<8x16xbf16>) -> tensor<8x16xbf16> {
  %r = dist.all_reduce %p on @mesh axes = ["fsdp"] reduction = max wire = bf16 accum = f32 : tensor<8x16xbf16> -> tensor<8x16xbf16>
  return %r : tensor<8x16xbf16>
}

// An all-reduce of 15 bf16 elements over 2 ranks pads to segments of 8:
// received 2 x 8 + the sum 8 (48 B), the padded send and gather blocks
// 2 x 2 x 8 x 2 (64 B), p 30 + r 30.
// CHECK-LABEL: func.func @padded_all_reduce(
// CHECK-SAME: plan.memory = {activation = 172 : i64,
func.func @padded_all_reduce(%p: tensor<3x5xbf16>) -> tensor<3x5xbf16> {
  %r = dist.all_reduce %p on @mesh axes = ["fsdp"] reduction = sum wire = bf16 accum = f32 : tensor<3x5xbf16> -> tensor<3x5xbf16>
  return %r : tensor<3x5xbf16>
}
