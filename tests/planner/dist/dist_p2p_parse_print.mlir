// RUN: plan-opt %s | plan-opt | FileCheck %s
// RUN: plan-opt %s --mlir-print-op-generic | plan-opt | FileCheck %s

dist.mesh @mesh shape = [2, 2] axes = ["pp", "fsdp"]

// Tests that the point-to-point ops, blocking and async, print their peer,
// axis and tag, and that a send's wait yields the sent tensor's type.
// CHECK-LABEL: func.func @stage0
// CHECK: dist.send %{{.*}} to 1 on @mesh axis = "pp" tag = 0 : tensor<2x8xf32>
// CHECK: %[[F:.*]] = dist.send_start %{{.*}} to 1 on @mesh axis = "pp" tag = 1 : tensor<2x8xf32> -> !dist.future<tensor<2x8xf32>>
// CHECK: dist.wait %[[F]] : !dist.future<tensor<2x8xf32>>
// CHECK: dist.recv from 1 on @mesh axis = "pp" tag = 2 : tensor<2x8xf32>
// CHECK: %[[G:.*]] = dist.recv_start from 1 on @mesh axis = "pp" tag = 3 : !dist.future<tensor<2x8xbf16>>
// CHECK: dist.wait %[[G]] : !dist.future<tensor<2x8xbf16>>
func.func @stage0(%act: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>) {
  dist.send %act to 1 on @mesh axis = "pp" tag = 0 : tensor<2x8xf32>
  %f = dist.send_start %act to 1 on @mesh axis = "pp" tag = 1 : tensor<2x8xf32> -> !dist.future<tensor<2x8xf32>>
  %sent = dist.wait %f : !dist.future<tensor<2x8xf32>>
  %grad = dist.recv from 1 on @mesh axis = "pp" tag = 2 : tensor<2x8xf32>
  %g = dist.recv_start from 1 on @mesh axis = "pp" tag = 3 : !dist.future<tensor<2x8xbf16>>
  %grad16 = dist.wait %g : !dist.future<tensor<2x8xbf16>>
  return %sent, %grad, %grad16 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>
}

// Tests that a received tensor's placement on the other axes is stated by
// dist.annotate.
// CHECK-LABEL: func.func @stage1
// CHECK: %[[R:.*]] = dist.recv from 0 on @mesh axis = "pp" tag = 0 : tensor<2x8xf32>
// CHECK: dist.annotate %[[R]] <@mesh, [replicate, shard<0>]> global tensor<4x8xf32> : tensor<2x8xf32>
func.func @stage1() -> tensor<2x8xf32> {
  %r = dist.recv from 0 on @mesh axis = "pp" tag = 0 : tensor<2x8xf32>
  %a = dist.annotate %r <@mesh, [replicate, shard<0>]> global tensor<4x8xf32> : tensor<2x8xf32>
  return %a : tensor<2x8xf32>
}
