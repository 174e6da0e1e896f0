// RUN: plan-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

dist.mesh @mesh shape = [4, 2] axes = ["pp", "tp"]

// Tests that the peer must be a coordinate along the axis.
func.func @peer_outside(%x: tensor<2xf32>) {
  // expected-error @+1 {{'dist.send' op peer 4 is outside axis "pp" of size 4; use a coordinate in [0, 4)}}
  dist.send %x to 4 on @mesh axis = "pp" tag = 0 : tensor<2xf32>
  return
}

// -----

dist.mesh @mesh shape = [4, 2] axes = ["pp", "tp"]

// Tests that a negative peer is refused.
func.func @negative_peer() -> tensor<2xf32> {
  // expected-error @+1 {{'dist.recv' op peer -1 is negative; name the peer by its coordinate along the axis}}
  %r = dist.recv from -1 on @mesh axis = "pp" tag = 0 : tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

dist.mesh @mesh shape = [4, 2] axes = ["pp", "tp"]

// Tests that a negative tag is refused.
func.func @negative_tag(%x: tensor<2xf32>) {
  // expected-error @+1 {{'dist.send' op tag -3 is negative; use a tag >= 0}}
  dist.send %x to 1 on @mesh axis = "pp" tag = -3 : tensor<2xf32>
  return
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [4, 2] axes = ["pp", "tp"]

// Tests that the axis must be one of the mesh's.
func.func @unknown_axis() -> tensor<2xf32> {
  // expected-error @+1 {{'dist.recv' op mesh axis "stage" is not an axis of @mesh}}
  %r = dist.recv from 0 on @mesh axis = "stage" tag = 0 : tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// Tests that the mesh must exist.
func.func @no_mesh(%x: tensor<2xf32>) {
  // expected-error @+1 {{'dist.send' op @nowhere does not name a dist.mesh}}
  dist.send %x to 0 on @nowhere axis = "pp" tag = 0 : tensor<2xf32>
  return
}

// -----

dist.mesh @mesh shape = [4, 2] axes = ["pp", "tp"]

// Tests that a send's future carries the sent tensor's type.
func.func @send_future_type(%x: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.send_start' op future carries 'tensor<4xf32>' but the sent tensor is 'tensor<2xf32>'; a send's future carries the sent tensor's type}}
  %f = dist.send_start %x to 1 on @mesh axis = "pp" tag = 0 : tensor<2xf32> -> !dist.future<tensor<4xf32>>
  %y = dist.wait %f : !dist.future<tensor<4xf32>>
  return %y : tensor<4xf32>
}

// -----

dist.mesh @mesh shape = [4, 2] axes = ["pp", "tp"]

// Tests that a started receive must be waited on exactly once.
func.func @recv_never_waited() {
  // expected-error @+1 {{'dist.recv_start' op future has 0 uses; consume it with exactly one dist.wait}}
  %f = dist.recv_start from 0 on @mesh axis = "pp" tag = 0 : !dist.future<tensor<2xf32>>
  return
}

// -----

dist.mesh @mesh shape = [4, 2] axes = ["pp", "tp"]

// Tests that a started send is waited on in its own block.
func.func @send_waited_elsewhere(%x: tensor<2xf32>) {
  // expected-error @+1 {{'dist.send_start' op future is waited on in another block; wait in the block of the start}}
  %f = dist.send_start %x to 1 on @mesh axis = "pp" tag = 0 : tensor<2xf32> -> !dist.future<tensor<2xf32>>
  "test.region"() ({
    // expected-note @+1 {{dist.wait here}}
    %y = dist.wait %f : !dist.future<tensor<2xf32>>
  }) : () -> ()
  return
}
