// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-stages="stages=2 layers=2,2" --plan-split-stages | FileCheck %s --check-prefix=TWO
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-stages="stages=2 virtual=2" --plan-split-stages | FileCheck %s --check-prefix=VIRTUAL

// A tied table (GPT-2's wte): the embedding reads it in the first chunk,
// and layer 3 (a projection to the vocabulary and back) and the LM head
// read it in the last. Autodiff sums the four uses' cotangents in one
// chain of nn.add (head, back, vocab, embedding).

// Tests that each chunk that reads the table gets it as an argument marked
// with the stages holding a replica, returns the sum of its own terms of
// its gradient (the last chunk's three in the step's order, each add right
// after the later operand), and that no part of the gradient crosses the
// cut: the only transfers are the residual stream and its gradient.
// TWO-LABEL: func.func @step.chunk0
// TWO-SAME: %arg1: tensor<16x8xf32> {dist.pipeline_arg = 2 : i64, dist.placement = #dist.placement<@mesh, [replicate]>, dist.stages = array<i64: 0, 1>, dist.tied_stages = array<i64: 0, 1>, nn.name = "wte.weight", nn.param}
// TWO-SAME: -> (tensor<16x8xf32> {dist.placement = #dist.placement<@mesh, [replicate]>, nn.grad_of = 1 : i64, nn.name = "wte.weight"}
// TWO: dist.send %{{.+}} to 1 on @mesh axis = "pp" tag = 0
// TWO-NEXT: dist.recv from 1 on @mesh axis = "pp" tag = 1
// TWO-NOT: dist.send
// TWO-NOT: nn.add
// TWO: %[[EMB:.+]] = nn.embedding_grad %arg0
// TWO-NEXT: return %[[EMB]],
// TWO-LABEL: func.func @step.chunk1
// TWO-SAME: %arg1: tensor<16x8xf32> {dist.pipeline_arg = 2 : i64, dist.placement = #dist.placement<@mesh, [replicate]>, dist.stages = array<i64: 0, 1>, dist.tied_stages = array<i64: 0, 1>, nn.name = "wte.weight", nn.param}
// TWO-SAME: -> (tensor<f32> {{.+}}, tensor<16x8xf32> {dist.placement = #dist.placement<@mesh, [replicate]>, nn.grad_of = 1 : i64, nn.name = "wte.weight"}
// TWO: %[[VOCAB:.+]] = nn.matmul %{{.+}}, %arg1 transpose_rhs {{.+}} -> tensor<4x6x16xf32>
// TWO: %[[HEAD:.+]] = nn.matmul %{{.+}}, %{{.+}} transpose_lhs {{.+}} -> tensor<16x8xf32>
// TWO-NEXT: nn.matmul
// TWO-NEXT: %[[BACK:.+]] = nn.matmul %[[VOCAB]], %{{.+}} transpose_lhs {{.+}} -> tensor<16x8xf32>
// TWO-NEXT: %[[SUM1:.+]] = nn.add %[[HEAD]], %[[BACK]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]}
// TWO-NEXT: nn.matmul
// TWO-NEXT: %[[PROJ:.+]] = nn.matmul %{{.+}}, %{{.+}} transpose_lhs {{.+}} -> tensor<16x8xf32>
// TWO-NEXT: %[[SUM:.+]] = nn.add %[[SUM1]], %[[PROJ]]
// TWO: dist.send %{{.+}} to 0 on @mesh axis = "pp" tag = 1
// TWO-NOT: dist.send
// TWO: return %{{.+}}, %[[SUM]],

// Tests that with two chunks per stage the table's readers are chunk 0
// (stage 0) and chunk 3 (stage 1): those two hold it, the middle chunks
// do not.
// VIRTUAL-LABEL: func.func @step.chunk0
// VIRTUAL-SAME: dist.tied_stages = array<i64: 0, 1>
// VIRTUAL-LABEL: func.func @step.chunk1
// VIRTUAL-NOT: wte.weight
// VIRTUAL-LABEL: func.func @step.chunk2
// VIRTUAL-NOT: wte.weight
// VIRTUAL-LABEL: func.func @step.chunk3
// VIRTUAL-SAME: dist.tied_stages = array<i64: 0, 1>, nn.name = "wte.weight"
// VIRTUAL-SAME: nn.grad_of = 1 : i64, nn.name = "wte.weight"

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
