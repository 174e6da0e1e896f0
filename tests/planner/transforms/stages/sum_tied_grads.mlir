// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-stages="stages=2 layers=2,2" --plan-split-stages --plan-insert-collectives --plan-schedule --plan-sum-tied-grads --plan-optimizer-step | FileCheck %s --check-prefix=PP
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2,fsdp=2 axes=pp,fsdp" --plan-stages="stages=2 layers=2,2" --plan-split-stages --plan-insert-collectives --plan-schedule --plan-accumulate="micro-steps=2" --plan-sum-tied-grads | FileCheck %s --check-prefix=FSDP
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives --plan-sum-tied-grads | FileCheck %s --check-prefix=UNSTAGED

// The tied table of split_stages_tied.mlir (embedding in chunk 0; layer
// 3's projection and the LM head in chunk 1), its gradient summed across
// the two stages that hold it.

// Tests that each holder, at the end of its function and in the optimizer
// phase, posts the receive of the other stage's part, starts the send of
// its own, waits for the receive, adds the parts with stage 0's first,
// waits for the send, returns the sum, and that the table's AdamW step
// reads the sum. The tags follow the stages' activation transfers (0, 1):
// 2 from stage 0 to 1, 3 back.
// PP-LABEL: func.func @step.chunk0
// PP: %[[OWN:.+]] = nn.embedding_grad
// PP: %[[R:.+]] = dist.recv_start from 1 on @mesh axis = "pp" tag = 3 {dist.operand_placements = [], dist.optimizer_phase, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : !dist.future<tensor<16x8xf32>>
// PP-NEXT: %[[S:.+]] = dist.send_start %[[OWN]] to 1 on @mesh axis = "pp" tag = 2 {dist.operand_placements = [#dist.placement<@mesh, [replicate]>], dist.optimizer_phase, dist.result_placements = []} : tensor<16x8xf32> -> !dist.future<tensor<16x8xf32>>
// PP-NEXT: %[[THEIRS:.+]] = dist.wait %[[R]] {dist.optimizer_phase} : !dist.future<tensor<16x8xf32>>
// PP-NEXT: %[[SUM:.+]] = nn.add %[[OWN]], %[[THEIRS]] {{{.*}}dist.optimizer_phase{{.*}}}
// PP-NEXT: dist.wait %[[S]] {dist.optimizer_phase}
// PP-NEXT: dist.optimizer_step %arg1, %[[SUM]],
// PP: return %[[SUM]],
// PP-LABEL: func.func @step.chunk1
// PP: %[[R1:.+]] = dist.recv_start from 0 on @mesh axis = "pp" tag = 2 {{.+}} : !dist.future<tensor<16x8xf32>>
// PP-NEXT: %[[S1:.+]] = dist.send_start %[[OWN1:.+]] to 0 on @mesh axis = "pp" tag = 3
// PP-NEXT: %[[THEIRS1:.+]] = dist.wait %[[R1]]
// PP-NEXT: %[[SUM1:.+]] = nn.add %[[THEIRS1]], %[[OWN1]]
// PP-NEXT: dist.wait %[[S1]]
// PP-NEXT: dist.optimizer_step %arg1, %[[SUM1]],
// PP: return %{{.+}}, %[[SUM1]],

// Tests that under fsdp the parts exchanged are each stage's reduced
// shard of the table's gradient, summed over the micro-steps: the
// exchange reads dist.accumulate's sum, once per step.
// FSDP-LABEL: func.func @step.chunk0
// FSDP: %[[RS:.+]] = dist.reduce_scatter_start %{{.+}} on @mesh axes = ["fsdp"] scatter_dim = 0 {{.+}} : tensor<16x8xf32> -> !dist.future<tensor<8x8xf32>>
// FSDP: %[[W:.+]] = dist.wait %[[RS]]
// FSDP-NEXT: %[[ACC:.+]] = dist.accumulate %[[W]] : tensor<8x8xf32>
// FSDP: dist.recv_start from 1 on @mesh axis = "pp" tag = 3 {dist.operand_placements = [], dist.optimizer_phase, dist.result_placements = [#dist.placement<@mesh, [replicate, shard<0>]>]} : !dist.future<tensor<8x8xf32>>
// FSDP-NEXT: dist.send_start %[[ACC]] to 1
// FSDP-NEXT: %[[GOT:.+]] = dist.wait
// FSDP-NEXT: %[[SUM:.+]] = nn.add %[[ACC]], %[[GOT]]
// FSDP-NEXT: dist.wait
// FSDP-NEXT: return %[[SUM]],

// Tests that a step without stages has no tie and is left alone.
// UNSTAGED-LABEL: func.func @step(
// UNSTAGED-NOT: dist.optimizer_phase

func.func @step(%ids: tensor<4x6xi32>, %labels: tensor<4x6xi32>,
    %wte: tensor<16x8xf32> {nn.param, nn.name = "wte.weight"},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "h.0.fc.weight"},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "h.1.fc.weight"},
    %w2: tensor<8x8xf32> {nn.param, nn.name = "h.2.fc.weight"},
    %w3: tensor<8x8xf32> {nn.param, nn.name = "h.3.fc.weight"}) -> tensor<f32> {
  %x0 = nn.embedding %ids, %wte : (tensor<4x6xi32>, tensor<16x8xf32>) -> tensor<4x6x8xf32> loc("wte")
  %h0 = nn.linear %x0, %w0 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("h.0.fc")
  %h1 = nn.linear %h0, %w1 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("h.1.fc")
  %h2 = nn.linear %h1, %w2 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("h.2.fc")
  %h3 = nn.linear %h2, %w3 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("h.3.fc")
  %v3 = nn.matmul %h3, %wte transpose_rhs : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32> loc("h.3.vocab")
  %b3 = nn.matmul %v3, %wte : (tensor<4x6x16xf32>, tensor<16x8xf32>) -> tensor<4x6x8xf32> loc("h.3.back")
  %logits = nn.matmul %b3, %wte transpose_rhs : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32> loc("lm_head")
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x6x16xf32>, tensor<4x6xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
