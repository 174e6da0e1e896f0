// RUN: plan-opt %s --plan-autodiff --plan-stages="stages=2" | FileCheck %s --check-prefix=TWO
// RUN: plan-opt %s --plan-autodiff --plan-stages="stages=2 layers=1,3" | FileCheck %s --check-prefix=HAND
// RUN: plan-opt %s --plan-autodiff --plan-stages="stages=2 virtual=2" | FileCheck %s --check-prefix=VIRTUAL
// RUN: plan-opt %s --plan-autodiff --plan-recompute="mode=full" --plan-stages="stages=2" | FileCheck %s --check-prefix=RECOMPUTE
// RUN: plan-opt %s --plan-autodiff --plan-stages="stages=1" | FileCheck %s --check-prefix=ONE
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-stages="stages=0" | FileCheck %s --check-prefix=MESH
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-stages="stages=0" | FileCheck %s --check-prefix=ONE

// A four-layer stack (norm, linear, silu, residual add per layer) between
// an embedding and a norm, head and loss. The head's vocabulary is twice
// the width, so it weighs about a layer and a half.

// Two stages: layers 0-2 and layer 3 with the head (the largest chunk is
// the least it can be); each layer's backward in its forward's chunk; the
// embedding and its gradient in the first, the loss gradient argument in
// the last.
// TWO-LABEL: func.func @step
// TWO-SAME: %arg0: tensor<4x6xi32> {dist.stages = array<i64: 0>}
// TWO-SAME: %arg1: tensor<4x6xi32> {dist.stages = array<i64: 1>}
// TWO-SAME: nn.name = "layers.2.fc.weight"
// TWO-SAME: {dist.stages = array<i64: 1>, nn.name = "layers.3.norm.weight"
// TWO-SAME: attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 3, 1>
// TWO: nn.embedding %arg0, %arg2 {dist.stage = 0 : i64}
// TWO: nn.linear %{{.+}}, %arg8 {dist.stage = 0 : i64}
// TWO: nn.rms_norm %{{.+}}, %arg9 {{.+}} {dist.stage = 1 : i64}
// TWO: nn.linear %{{.+}}, %arg12 {dist.stage = 1 : i64}
// TWO: nn.cross_entropy_grad {{.+}} {dist.stage = 1 : i64}
// TWO: nn.rms_norm_grad %{{.+}}, %arg9, {{.+}} {dist.stage = 1 : i64}
// TWO: nn.matmul %{{.+}}, %arg8 transpose_rhs {dist.stage = 0 : i64}
// TWO: nn.embedding_grad %arg0, {{.+}} {dist.stage = 0 : i64}
// TWO-NOT: dist.stage = 1
// TWO: return

// By hand: layer 0 alone, then layers 1-3 with the head.
// HAND: dist.stage_layers = array<i64: 1, 3>
// HAND: nn.linear %{{.+}}, %arg4 {dist.stage = 0 : i64}
// HAND: nn.rms_norm %{{.+}}, %arg5 {{.+}} {dist.stage = 1 : i64}

// Interleaved: four chunks of one layer; chunk c runs on stage c mod 2.
// VIRTUAL: dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1, 1, 1>
// VIRTUAL: nn.embedding {{.+}} {dist.stage = 0 : i64}
// VIRTUAL: nn.linear %{{.+}}, %arg4 {dist.stage = 0 : i64}
// VIRTUAL: nn.linear %{{.+}}, %arg6 {dist.stage = 1 : i64}
// VIRTUAL: nn.linear %{{.+}}, %arg8 {dist.stage = 2 : i64}
// VIRTUAL: nn.linear %{{.+}}, %arg10 {dist.stage = 3 : i64}
// VIRTUAL: nn.linear %{{.+}}, %arg12 {dist.stage = 3 : i64}

// Recomputed clones (located at their layer) run in the backward of their
// layer's chunk, and their FLOPs count there.
// RECOMPUTE: dist.stage_layers = array<i64: 3, 1>
// RECOMPUTE: nn.cross_entropy_grad
// RECOMPUTE: nn.linear %{{.+}}, %arg10 {dist.stage = 1 : i64, nn.recompute}
// RECOMPUTE: nn.linear %{{.+}}, %arg8 {dist.stage = 0 : i64, nn.recompute}

// stages=0 takes the count from the mesh's pp axis (the plan pipeline's
// way); a mesh without one has one stage.
// MESH: dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 3, 1>

// One stage: nothing changes.
// ONE-NOT: dist.stage

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
