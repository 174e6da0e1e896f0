// RUN: plan-opt %s | plan-opt | FileCheck %s
// RUN: plan-opt %s --mlir-print-op-generic | plan-opt | FileCheck %s

// Tests that a gradient goes to the host, AdamW runs there on host states,
// and the master copy comes back into the bf16 parameter: the copies print
// their tensors and futures, the host arguments keep dist.memory.
// CHECK-LABEL: func.func @offloaded_step
// CHECK-SAME: %[[P:[^:]*]]: tensor<4x16xbf16>
// CHECK-SAME: %[[M:[^:]*]]: tensor<4x16xf32> {dist.memory = "host"}
// CHECK: %[[F:.*]] = dist.copy_to_host_start %{{.*}} : tensor<4x16xbf16> -> !dist.future<tensor<4x16xbf16>>
// CHECK-NEXT: %[[G:.*]] = dist.wait %[[F]] : !dist.future<tensor<4x16xbf16>>
// CHECK-NEXT: %[[S:[^,]*]], %{{.*}}, %{{.*}} = dist.optimizer_step %[[M]], %[[G]],
// CHECK-NEXT: %[[U:.*]] = dist.copy_into_device_start %[[S]] into %[[P]] : tensor<4x16xf32> into tensor<4x16xbf16> -> !dist.future<tensor<4x16xbf16>>
// CHECK-NEXT: dist.wait %[[U]] : !dist.future<tensor<4x16xbf16>>
func.func @offloaded_step(%p: tensor<4x16xbf16>, %master: tensor<4x16xf32> {dist.memory = "host"},
                          %m: tensor<4x16xf32> {dist.memory = "host"},
                          %v: tensor<4x16xf32> {dist.memory = "host"},
                          %grad: tensor<4x16xbf16>) -> tensor<4x16xbf16> {
  %f = dist.copy_to_host_start %grad : tensor<4x16xbf16> -> !dist.future<tensor<4x16xbf16>>
  %g = dist.wait %f : !dist.future<tensor<4x16xbf16>>
  %w1, %m1, %v1 = dist.optimizer_step %master, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4x16xf32>, tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xf32>
  %u = dist.copy_into_device_start %w1 into %p : tensor<4x16xf32> into tensor<4x16xbf16> -> !dist.future<tensor<4x16xbf16>>
  %p1 = dist.wait %u : !dist.future<tensor<4x16xbf16>>
  return %g : tensor<4x16xbf16>
}
