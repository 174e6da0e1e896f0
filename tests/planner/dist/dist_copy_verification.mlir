// RUN: plan-opt %s -split-input-file -verify-diagnostics

// Tests that a copy to the host reads device memory.
func.func @to_host_from_host(%x: tensor<4xf32> {dist.memory = "host"}) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.copy_to_host_start' op copies a tensor that is already in host memory; copy a device tensor, or use the host tensor as it is}}
  %f = dist.copy_to_host_start %x : tensor<4xf32> -> !dist.future<tensor<4xf32>>
  %y = dist.wait %f : !dist.future<tensor<4xf32>>
  return %y : tensor<4xf32>
}

// -----

// Tests that a copy to the host keeps the tensor's type.
func.func @to_host_type(%x: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'dist.copy_to_host_start' op future carries 'tensor<4xbf16>' but the copied tensor is 'tensor<4xf32>'; a copy to the host keeps the tensor's type}}
  %f = dist.copy_to_host_start %x : tensor<4xf32> -> !dist.future<tensor<4xbf16>>
  %y = dist.wait %f : !dist.future<tensor<4xbf16>>
  return %y : tensor<4xbf16>
}

// -----

// Tests that a copy's future is waited on once.
func.func @to_host_never_waited(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.copy_to_host_start' op future has 0 uses; consume it with exactly one dist.wait}}
  %f = dist.copy_to_host_start %x : tensor<4xf32> -> !dist.future<tensor<4xf32>>
  return
}

// -----

// Tests that a copy into the device reads host memory.
func.func @into_device_from_device(%x: tensor<4xf32>, %p: tensor<4xf32>) {
  // expected-error @+1 {{'dist.copy_into_device_start' op source is in device memory; the copy reads host memory into device memory}}
  %f = dist.copy_into_device_start %x into %p : tensor<4xf32> into tensor<4xf32> -> !dist.future<tensor<4xf32>>
  %y = dist.wait %f : !dist.future<tensor<4xf32>>
  return
}

// -----

// Tests that a copy into the device writes device memory.
func.func @into_device_to_host(%x: tensor<4xf32> {dist.memory = "host"}, %p: tensor<4xf32> {dist.memory = "host"}) {
  // expected-error @+1 {{'dist.copy_into_device_start' op dest is in host memory; the copy reads host memory into device memory}}
  %f = dist.copy_into_device_start %x into %p : tensor<4xf32> into tensor<4xf32> -> !dist.future<tensor<4xf32>>
  %y = dist.wait %f : !dist.future<tensor<4xf32>>
  return
}

// -----

// Tests that a copy into the device keeps the shape.
func.func @into_device_shape(%x: tensor<4xf32> {dist.memory = "host"}, %p: tensor<2x2xbf16>) {
  // expected-error @+1 {{'dist.copy_into_device_start' op source shape [4] != dest shape [2, 2]; the copy overwrites dest element for element}}
  %f = dist.copy_into_device_start %x into %p : tensor<4xf32> into tensor<2x2xbf16> -> !dist.future<tensor<2x2xbf16>>
  %y = dist.wait %f : !dist.future<tensor<2x2xbf16>>
  return
}

// -----

// Tests that the wait of a copy into the device yields dest's type.
func.func @into_device_future(%x: tensor<4xf32> {dist.memory = "host"}, %p: tensor<4xbf16>) {
  // expected-error @+1 {{'dist.copy_into_device_start' op future carries 'tensor<4xf32>' but dest is 'tensor<4xbf16>'; its wait yields dest's new value}}
  %f = dist.copy_into_device_start %x into %p : tensor<4xf32> into tensor<4xbf16> -> !dist.future<tensor<4xf32>>
  %y = dist.wait %f : !dist.future<tensor<4xf32>>
  return
}

// -----

// Tests that an optimizer step does not mix host and device tensors.
func.func @step_mixes_memory(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32> {dist.memory = "host"}, %v: tensor<4xf32>) {
  // expected-error @+1 {{'dist.optimizer_step' op mixes host and device memory (operand #2 is in host memory, the param in device memory); copy the tensors to where the step runs}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that dist.memory names a memory.
// expected-error @+1 {{argument #0: dist.memory is "disk"; it must be "host" or "device"}}
func.func @unknown_memory(%x: tensor<4xf32> {dist.memory = "disk"}) {
  return
}
