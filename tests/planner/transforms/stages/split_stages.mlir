// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-stages="stages=2" --plan-split-stages | FileCheck %s --check-prefix=TWO
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-stages="stages=2 virtual=2" --plan-split-stages | FileCheck %s --check-prefix=VIRTUAL
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2,tp=2 axes=pp,tp" --plan-stages="stages=2" --plan-split-stages | FileCheck %s --check-prefix=TP
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-stages="stages=2" --plan-split-stages --plan-insert-collectives --plan-schedule | FileCheck %s --check-prefix=ASYNC
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-split-stages | FileCheck %s --check-prefix=UNSTAGED

// The four-layer step of stages.mlir, split at its chunks.

// Two stages: layers 0-2 with the embedding, then layer 3 with the head and
// the loss. Each chunk keeps the arguments it reads and returns its own
// parameters' gradients (nn.grad_of renumbered to its arguments); the
// residual stream crosses forward, its gradient backward, each as a send
// after its definition and a receive before its first use, paired by tag.
// TWO-LABEL: func.func @step.chunk0(%arg0: tensor<4x6xi32>
// TWO-SAME: nn.name = "tok_embeddings.weight"
// TWO-SAME: nn.name = "layers.2.fc.weight"
// TWO-NOT: layers.3
// TWO-SAME: -> (tensor<16x8xf32> {{{.*}}nn.grad_of = 1 : i64, nn.name = "tok_embeddings.weight"}
// TWO-SAME: attributes {dist.pipeline_chunk = 0 : i64, dist.pipeline_function = "step", dist.pipeline_schedule = "1f1b", dist.pipeline_stage = 0 : i64, dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 3, 1>}
// TWO: nn.rms_norm %{{.+}}, %arg6
// TWO: %[[X3:.+]] = nn.add
// TWO-NEXT: dist.send %[[X3]] to 1 on @mesh axis = "pp" tag = 0 {dist.operand_placements = [#dist.placement<@mesh, [replicate]>], dist.result_placements = []} : tensor<4x6x8xf32>
// TWO-NEXT: %[[DX3:.+]] = dist.recv from 1 on @mesh axis = "pp" tag = 1 {dist.operand_placements = [], dist.result_placements = [#dist.placement<@mesh, [replicate]>], nn.backward_root} : tensor<4x6x8xf32>
// TWO-NEXT: nn.silu_grad %{{.+}}, %[[DX3]]
// TWO: nn.embedding_grad
// TWO-NEXT: return
// TWO-LABEL: func.func @step.chunk1(%arg0: tensor<4x6xi32>
// TWO-SAME: nn.name = "layers.3.norm.weight"
// TWO-SAME: %arg5: tensor<f32>
// TWO-SAME: -> (tensor<f32>
// TWO-SAME: nn.grad_of = 4 : i64, nn.name = "output.weight"
// TWO-SAME: dist.pipeline_chunk = 1 : i64
// TWO-SAME: dist.pipeline_stage = 1 : i64
// TWO-SAME: nn.loss_grad_arg = 5 : i64
// TWO-NEXT: %[[X3R:.+]] = dist.recv from 0 on @mesh axis = "pp" tag = 0
// TWO-NEXT: nn.rms_norm %[[X3R]]
// TWO: nn.cross_entropy_grad %{{.+}}, %arg0, %arg5
// TWO: %[[G:.+]] = nn.add
// TWO-NEXT: dist.send %[[G]] to 0 on @mesh axis = "pp" tag = 1
// TWO-NEXT: return
// TWO-NOT: func.func @step(
// TWO-NOT: dist.stage =

// Interleaved (the schedule two chunks per stage get unless one is
// given): four chunks of one layer, chunk c on stage c mod 2; tags
// number the transfers in program order, forward first.
// VIRTUAL-LABEL: func.func @step.chunk0
// VIRTUAL-SAME: dist.pipeline_chunk = 0 : i64, {{.+}} dist.pipeline_schedule = "interleaved-1f1b", dist.pipeline_stage = 0 : i64
// VIRTUAL: dist.send {{.+}} to 1 on @mesh axis = "pp" tag = 0
// VIRTUAL: dist.recv from 1 on @mesh axis = "pp" tag = 5 {{.+}} nn.backward_root
// VIRTUAL-LABEL: func.func @step.chunk1
// VIRTUAL-SAME: dist.pipeline_stage = 1 : i64
// VIRTUAL: dist.recv from 0 on @mesh axis = "pp" tag = 0
// VIRTUAL: dist.send {{.+}} to 0 on @mesh axis = "pp" tag = 1
// VIRTUAL: dist.recv from 0 on @mesh axis = "pp" tag = 4 {{.+}} nn.backward_root
// VIRTUAL: dist.send {{.+}} to 0 on @mesh axis = "pp" tag = 5
// VIRTUAL-LABEL: func.func @step.chunk2
// VIRTUAL-SAME: dist.pipeline_stage = 0 : i64
// VIRTUAL: dist.recv from 1 on @mesh axis = "pp" tag = 1
// VIRTUAL: dist.send {{.+}} to 1 on @mesh axis = "pp" tag = 2
// VIRTUAL: dist.recv from 1 on @mesh axis = "pp" tag = 3 {{.+}} nn.backward_root
// VIRTUAL: dist.send {{.+}} to 1 on @mesh axis = "pp" tag = 4
// VIRTUAL-LABEL: func.func @step.chunk3
// VIRTUAL-SAME: dist.pipeline_stage = 1 : i64
// VIRTUAL-SAME: nn.loss_grad_arg
// VIRTUAL: dist.recv from 0 on @mesh axis = "pp" tag = 2
// VIRTUAL: nn.cross_entropy
// VIRTUAL: dist.send {{.+}} to 0 on @mesh axis = "pp" tag = 3

// With tp inside the stages, a transfer keeps its value's placement on
// every axis.
// TP: dist.send {{.+}} {dist.operand_placements = [#dist.placement<@mesh, [replicate, shard<2>]>], dist.result_placements = []
// TP: dist.recv {{.+}} {dist.operand_placements = [], dist.result_placements = [#dist.placement<@mesh, [replicate, replicate]>]
// TP: dist.recv {{.+}} {dist.operand_placements = [], dist.result_placements = [#dist.placement<@mesh, [replicate, shard<2>]>]
// TP: dist.send {{.+}} {dist.operand_placements = [#dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = []

// plan-schedule posts every receive at the top of its chunk and waits for
// it where the value is first used (the wait, not the early start, roots
// the backward pass); each send starts where it was and is waited for at
// the end of the chunk. So a send always finds its receive posted.
// ASYNC-LABEL: func.func @step.chunk0
// ASYNC-NEXT: %[[R:.+]] = dist.recv_start from 1 on @mesh axis = "pp" tag = 1 {{{[^}]*}}} : !dist.future<tensor<4x6x8xf32>>
// ASYNC: %[[S:.+]] = dist.send_start %{{.+}} to 1 on @mesh axis = "pp" tag = 0 {{.+}} : tensor<4x6x8xf32> -> !dist.future<tensor<4x6x8xf32>>
// ASYNC-NEXT: %[[G:.+]] = dist.wait %[[R]] {nn.backward_root}
// ASYNC-NEXT: nn.silu_grad %{{.+}}, %[[G]]
// ASYNC: nn.embedding_grad
// ASYNC-NEXT: dist.wait %[[S]]
// ASYNC-NEXT: return
// ASYNC-LABEL: func.func @step.chunk1
// ASYNC-NEXT: %[[R1:.+]] = dist.recv_start from 0
// ASYNC-NEXT: dist.wait %[[R1]] :
// ASYNC: %[[S1:.+]] = dist.send_start
// ASYNC-NEXT: dist.wait %[[S1]]
// ASYNC-NEXT: return
// ASYNC-NOT: dist.recv from
// ASYNC-NOT: dist.send %

// A step without stages is left alone.
// UNSTAGED: func.func @step(
// UNSTAGED-NOT: dist.send

func.func @step(%ids: tensor<4x6xi32>,
    %labels: tensor<4x6xi32>,
    %emb: tensor<16x8xf32> {nn.param, nn.name = "tok_embeddings.weight"},
    %g0: tensor<8xf32> {nn.param, nn.name = "layers.0.norm.weight"},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight"},
    %g1: tensor<8xf32> {nn.param, nn.name = "layers.1.norm.weight"},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight"},
    %g2: tensor<8xf32> {nn.param, nn.name = "layers.2.norm.weight"},
    %w2: tensor<8x8xf32> {nn.param, nn.name = "layers.2.fc.weight"},
    %g3: tensor<8xf32> {nn.param, nn.name = "layers.3.norm.weight"},
    %w3: tensor<8x8xf32> {nn.param, nn.name = "layers.3.fc.weight"},
    %gf: tensor<8xf32> {nn.param, nn.name = "norm.weight"},
    %wh: tensor<8x16xf32> {nn.param, nn.name = "output.weight"}) -> tensor<f32> {
  %x0 = nn.embedding %ids, %emb : (tensor<4x6xi32>, tensor<16x8xf32>) -> tensor<4x6x8xf32> loc("tok_embeddings")
  %n0 = nn.rms_norm %x0, %g0 epsilon 1.0e-05 : (tensor<4x6x8xf32>, tensor<8xf32>) -> tensor<4x6x8xf32> loc("layers.0.norm")
  %h0 = nn.linear %n0, %w0 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("layers.0.fc")
  %a0 = nn.silu %h0 : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32> loc("layers.0.act")
  %x1 = nn.add %a0, %x0 : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32> loc("layers.0.residual")
  %n1 = nn.rms_norm %x1, %g1 epsilon 1.0e-05 : (tensor<4x6x8xf32>, tensor<8xf32>) -> tensor<4x6x8xf32> loc("layers.1.norm")
  %h1 = nn.linear %n1, %w1 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("layers.1.fc")
  %a1 = nn.silu %h1 : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32> loc("layers.1.act")
  %x2 = nn.add %a1, %x1 : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32> loc("layers.1.residual")
  %n2 = nn.rms_norm %x2, %g2 epsilon 1.0e-05 : (tensor<4x6x8xf32>, tensor<8xf32>) -> tensor<4x6x8xf32> loc("layers.2.norm")
  %h2 = nn.linear %n2, %w2 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("layers.2.fc")
  %a2 = nn.silu %h2 : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32> loc("layers.2.act")
  %x3 = nn.add %a2, %x2 : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32> loc("layers.2.residual")
  %n3 = nn.rms_norm %x3, %g3 epsilon 1.0e-05 : (tensor<4x6x8xf32>, tensor<8xf32>) -> tensor<4x6x8xf32> loc("layers.3.norm")
  %h3 = nn.linear %n3, %w3 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("layers.3.fc")
  %a3 = nn.silu %h3 : (tensor<4x6x8xf32>) -> tensor<4x6x8xf32> loc("layers.3.act")
  %x4 = nn.add %a3, %x3 : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32> loc("layers.3.residual")
  %nf = nn.rms_norm %x4, %gf epsilon 1.0e-05 : (tensor<4x6x8xf32>, tensor<8xf32>) -> tensor<4x6x8xf32> loc("norm")
  %logits = nn.linear %nf, %wh : (tensor<4x6x8xf32>, tensor<8x16xf32>) -> tensor<4x6x16xf32> loc("output")
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x6x16xf32>, tensor<4x6xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
