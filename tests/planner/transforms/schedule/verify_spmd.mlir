// RUN: plan-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect --plan-verify-spmd

// plan-verify-spmd refuses collectives, waits and frees that not every rank
// would reach (plan-opt registers no scf or cf dialect, so the branch and
// the second block are written as unregistered ops), and a gradient reduced
// with other dtypes on one mesh axis than on another. The future rules (one
// wait per start, in its block) are the dist op verifiers' (see
// tests/planner/dist/dist_async_verification.mlir).

dist.mesh @mesh shape = [2, 2] axes = ["dp", "fsdp"]

// Tests a free inside a branch (a collective there would name the mesh from
// inside an unregistered op, which its symbol lookup does not see through;
// every scheduled op goes through the same check).
func.func @in_branch() {
  // expected-note @below {{the region holder}}
  "test.if"() ({
    %v = "test.source"() : () -> tensor<4xf32>
    // expected-error @below {{'dist.free' op is inside a region of 'test.if'; ranks that take different paths would issue different collectives, so move it into the function body}}
    dist.free %v : tensor<4xf32>
    "test.yield"() : () -> ()
  }) : () -> ()
  return
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["dp", "fsdp"]

// Tests a start and its wait in a second block.
func.func @second_block(%x: tensor<2x16xf32>) -> tensor<4x16xf32> {
  "test.br"()[^next] : () -> ()
^next:
  // expected-error @below {{'dist.all_gather_start' op is in block 1 of its function; ranks that branch differently would issue different collectives, so keep it in the entry block}}
  %f = dist.all_gather_start %x on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<2x16xf32> -> !dist.future<tensor<4x16xf32>>
  // expected-error @below {{'dist.wait' op is in block 1 of its function; ranks that branch differently would issue different collectives, so keep it in the entry block}}
  %g = dist.wait %f : !dist.future<tensor<4x16xf32>>
  return %g : tensor<4x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["dp", "fsdp"]

// Tests an HSDP gradient reduced in f32 over fsdp but sent as bf16 over dp.
func.func @hsdp_dtypes(%grad: tensor<16x16xf32>) -> tensor<8x16xf32> {
  // expected-note @below {{the first reduction}}
  %s = dist.reduce_scatter_start %grad on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> !dist.future<tensor<8x16xf32>>
  %w = dist.wait %s : !dist.future<tensor<8x16xf32>>
  // expected-error @below {{'dist.all_reduce' op reduces over ["dp"] with wire = bf16 accum = f32, but its operand was reduced over ["fsdp"] with wire = f32 accum = f32; use the same wire and accumulation types on every mesh axis}}
  %r = dist.all_reduce %w on @mesh axes = ["dp"] reduction = sum wire = bf16 accum = f32 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["dp", "fsdp"]

// Tests that matching dtypes on both axes and an entry-block schedule pass.
func.func @hsdp_ok(%grad: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %s = dist.reduce_scatter_start %grad on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> !dist.future<tensor<8x16xf32>>
  %w = dist.wait %s : !dist.future<tensor<8x16xf32>>
  %r = dist.all_reduce %w on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
