// RUN: plan-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a started collective must be waited on.
func.func @never_waited(%x: tensor<2xf32>) {
  // expected-error @+1 {{'dist.all_gather_start' op future has 0 uses; consume it with exactly one dist.wait}}
  %f = dist.all_gather_start %x on @mesh axes = ["dp"] gather_dim = 0 wire = f32 : tensor<2xf32> -> !dist.future<tensor<4xf32>>
  return
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a future is waited on only once.
func.func @waited_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'dist.all_reduce_start' op future has 2 uses; consume it with exactly one dist.wait}}
  %f = dist.all_reduce_start %x on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4xf32> -> !dist.future<tensor<4xf32>>
  %a = dist.wait %f : !dist.future<tensor<4xf32>>
  %b = dist.wait %f : !dist.future<tensor<4xf32>>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that only dist.wait may consume a future.
func.func @escapes(%x: tensor<8xf32>) -> !dist.future<tensor<2xf32>> {
  // expected-error @+1 {{'dist.reduce_scatter_start' op future is used by 'func.return'; only dist.wait may consume it}}
  %f = dist.reduce_scatter_start %x on @mesh axes = ["tp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<8xf32> -> !dist.future<tensor<2xf32>>
  // expected-note @+1 {{used here}}
  return %f : !dist.future<tensor<2xf32>>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that the wait is in the block of its start.
func.func @wait_in_nested_block(%x: tensor<8xf32>) {
  // expected-error @+1 {{'dist.all_to_all_start' op future is waited on in another block; wait in the block of the start}}
  %f = dist.all_to_all_start %x on @mesh axes = ["tp"] split_dim = 0 concat_dim = 0 wire = f32 : tensor<8xf32> -> !dist.future<tensor<8xf32>>
  "test.region"() ({
    // expected-note @+1 {{dist.wait here}}
    %y = dist.wait %f : !dist.future<tensor<8xf32>>
  }) : () -> ()
  return
}

// -----

// Tests that a wait consumes the future of a start op, not one passed in.
func.func @wait_on_argument(%f: !dist.future<tensor<4xf32>>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.wait' op waits on a future that no dist.*_start op produced; wait on the result of a start op in this block}}
  %y = dist.wait %f : !dist.future<tensor<4xf32>>
  return %y : tensor<4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a start op is checked like its blocking form.
func.func @start_wrong_size(%x: tensor<2xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'dist.all_gather_start' op result dim 0 of size 6 != 4, operand dim 0 (2) times group size 2 (over dp=2); set it to 4}}
  %f = dist.all_gather_start %x on @mesh axes = ["dp"] gather_dim = 0 wire = f32 : tensor<2xf32> -> !dist.future<tensor<6xf32>>
  %y = dist.wait %f : !dist.future<tensor<6xf32>>
  return %y : tensor<6xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a reduce-scatter start is checked like its blocking form.
func.func @start_uneven(%x: tensor<10xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'dist.reduce_scatter_start' op operand dim 0 of size 10 does not divide by group size 4 (over tp=4)}}
  %f = dist.reduce_scatter_start %x on @mesh axes = ["tp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<10xf32> -> !dist.future<tensor<3xf32>>
  %y = dist.wait %f : !dist.future<tensor<3xf32>>
  return %y : tensor<3xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that the wait's result type is the type its future carries.
func.func @wait_result_type(%x: tensor<4xf32>) {
  %f = dist.all_reduce_start %x on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4xf32> -> !dist.future<tensor<4xf32>>
  // expected-error @+1 {{'dist.wait' op failed to verify that result type is the tensor type the future carries}}
  %y = "dist.wait"(%f) : (!dist.future<tensor<4xf32>>) -> tensor<8xf32>
  return
}
