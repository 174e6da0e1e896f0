// RUN: plan-opt %s | plan-opt | FileCheck %s
// RUN: plan-opt %s --mlir-print-op-generic | plan-opt | FileCheck %s

// Tests that parameters keep their nn.param and nn.name argument attributes.
// CHECK-LABEL: func.func @param_attrs
// CHECK-SAME: %{{.*}}: tensor<2x4xi32>, %{{.*}}: tensor<10x8xf32> {nn.name = "tok_embeddings", nn.param}, %{{.*}}: tensor<8xf32> {nn.param}
func.func @param_attrs(%ids: tensor<2x4xi32>,
                       %table: tensor<10x8xf32> {nn.param, nn.name = "tok_embeddings"},
                       %gamma: tensor<8xf32> {nn.param}) -> tensor<2x4x8xf32> {
  %h = nn.embedding %ids, %table : (tensor<2x4xi32>, tensor<10x8xf32>) -> tensor<2x4x8xf32>
  return %h : tensor<2x4x8xf32>
}

// Tests that nn.embedding round-trips, with i64 ids and a bf16 table.
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[IDS:.*]]: tensor<3xi64>, %[[TABLE:.*]]: tensor<10x8xbf16>)
// CHECK-NEXT: %[[H:.*]] = nn.embedding %[[IDS]], %[[TABLE]] : (tensor<3xi64>, tensor<10x8xbf16>) -> tensor<3x8xbf16>
// CHECK-NEXT: return %[[H]]
func.func @embedding(%ids: tensor<3xi64>, %table: tensor<10x8xbf16>) -> tensor<3x8xbf16> {
  %h = nn.embedding %ids, %table : (tensor<3xi64>, tensor<10x8xbf16>) -> tensor<3x8xbf16>
  return %h : tensor<3x8xbf16>
}

// Tests that nn.linear round-trips with and without its bias.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8x6xf32>, %[[B:.*]]: tensor<6xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.linear %[[X]], %[[W]], %[[B]] : (tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
// CHECK-NEXT: %[[Z:.*]] = nn.linear %[[X]], %[[W]] : (tensor<2x4x8xf32>, tensor<8x6xf32>) -> tensor<2x4x6xf32>
// CHECK-NEXT: return %[[Y]], %[[Z]]
func.func @linear(%x: tensor<2x4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<6xf32>)
    -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>) {
  %y = nn.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %z = nn.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x6xf32>) -> tensor<2x4x6xf32>
  return %y, %z : tensor<2x4x6xf32>, tensor<2x4x6xf32>
}

// Tests that nn.matmul round-trips in its three layouts.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.*]]: tensor<2x4x8xf16>, %[[B:.*]]: tensor<8x6xf16>, %[[C:.*]]: tensor<6x8xf16>, %[[D:.*]]: tensor<2x4x6xf16>)
// CHECK-NEXT: nn.matmul %[[A]], %[[B]] : (tensor<2x4x8xf16>, tensor<8x6xf16>) -> tensor<2x4x6xf16>
// CHECK-NEXT: nn.matmul %[[A]], %[[C]] transpose_rhs : (tensor<2x4x8xf16>, tensor<6x8xf16>) -> tensor<2x4x6xf16>
// CHECK-NEXT: nn.matmul %[[A]], %[[D]] transpose_lhs : (tensor<2x4x8xf16>, tensor<2x4x6xf16>) -> tensor<8x6xf16>
func.func @matmul(%a: tensor<2x4x8xf16>, %b: tensor<8x6xf16>, %c: tensor<6x8xf16>, %d: tensor<2x4x6xf16>)
    -> (tensor<2x4x6xf16>, tensor<2x4x6xf16>, tensor<8x6xf16>) {
  %0 = nn.matmul %a, %b : (tensor<2x4x8xf16>, tensor<8x6xf16>) -> tensor<2x4x6xf16>
  %1 = nn.matmul %a, %c transpose_rhs : (tensor<2x4x8xf16>, tensor<6x8xf16>) -> tensor<2x4x6xf16>
  %2 = nn.matmul %a, %d transpose_lhs : (tensor<2x4x8xf16>, tensor<2x4x6xf16>) -> tensor<8x6xf16>
  return %0, %1, %2 : tensor<2x4x6xf16>, tensor<2x4x6xf16>, tensor<8x6xf16>
}

// Tests that the norms round-trip with their epsilon.
// CHECK-LABEL: func.func @norms
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: nn.rms_norm %[[X]], %[[G]] epsilon 1.000000e-05 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.layer_norm %[[X]], %[[G]], %[[B]] epsilon 1.000000e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
func.func @norms(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %0 = nn.rms_norm %x, %g epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %1 = nn.layer_norm %x, %g, %b epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %0, %1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// Tests that nn.rope round-trips with and without inverse.
// CHECK-LABEL: func.func @rope
// CHECK-NEXT: nn.rope %{{.*}} theta 1.000000e+04 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
// CHECK-NEXT: nn.rope %{{.*}} theta 5.000000e+05 inverse : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
func.func @rope(%x: tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32> {
  %0 = nn.rope %x theta 1.0e+04 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  %1 = nn.rope %0 theta 5.0e+05 inverse : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return %1 : tensor<2x4x2x8xf32>
}

// Tests that nn.rope round-trips with linear and llama3 frequency scaling.
// CHECK-LABEL: func.func @rope_scaling
// CHECK-NEXT: nn.rope %{{.*}} theta 1.000000e+04 scaling_factor 4.000000e+00 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
// CHECK-NEXT: nn.rope %{{.*}} theta 5.000000e+05 inverse scaling_factor 8.000000e+00 low_freq_factor 1.000000e+00 high_freq_factor 4.000000e+00 original_max_positions 8192 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
func.func @rope_scaling(%x: tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32> {
  %0 = nn.rope %x theta 1.0e+04 scaling_factor 4.0 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  %1 = nn.rope %0 theta 5.0e+05 inverse scaling_factor 8.0 low_freq_factor 1.0 high_freq_factor 4.0 original_max_positions 8192 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return %1 : tensor<2x4x2x8xf32>
}

// Tests that nn.attention round-trips, multi-head and grouped-query.
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x4x8xf32>, %[[K:.*]]: tensor<2x4x2x8xf32>, %[[V:.*]]: tensor<2x4x2x8xf32>)
// CHECK-NEXT: nn.attention %[[Q]], %[[Q]], %[[Q]] : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
// CHECK-NEXT: nn.attention %[[Q]], %[[K]], %[[V]] : (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x4x8xf32>
func.func @attention(%q: tensor<2x4x4x8xf32>, %k: tensor<2x4x2x8xf32>, %v: tensor<2x4x2x8xf32>)
    -> (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) {
  %0 = nn.attention %q, %q, %q : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %1 = nn.attention %q, %k, %v : (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x4x8xf32>
  return %0, %1 : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>
}

// Tests that the elementwise ops and softmax round-trip.
// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[Y:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT: nn.silu %[[X]] : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.gelu %[[X]] : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.add %[[X]], %[[Y]] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.mul %[[X]], %[[Y]] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.softmax %[[X]] : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
func.func @elementwise(%x: tensor<2x4x8xf32>, %y: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %0 = nn.silu %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %1 = nn.gelu %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %2 = nn.add %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %3 = nn.mul %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %4 = nn.softmax %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %0, %1, %2, %3, %4 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// Tests that nn.reshape and nn.transpose round-trip.
// CHECK-LABEL: func.func @layout
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x16xf32>)
// CHECK-NEXT: %[[R:.*]] = nn.reshape %[[X]] : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
// CHECK-NEXT: nn.transpose %[[R]] permutation [0, 2, 1, 3] : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
func.func @layout(%x: tensor<2x4x16xf32>) -> tensor<2x2x4x8xf32> {
  %0 = nn.reshape %x : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %1 = nn.transpose %0 permutation [0, 2, 1, 3] : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  return %1 : tensor<2x2x4x8xf32>
}

// Tests that nn.cross_entropy round-trips and returns the f32 scalar loss for
// bf16 logits.
// CHECK-LABEL: func.func @cross_entropy
// CHECK-NEXT: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x4x10xbf16>, tensor<2x4xi32>) -> tensor<f32>
func.func @cross_entropy(%logits: tensor<2x4x10xbf16>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x4x10xbf16>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Tests that nn.bias_add round-trips.
// CHECK-LABEL: func.func @bias_add
// CHECK-NEXT: nn.bias_add %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
func.func @bias_add(%x: tensor<2x4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.bias_add %x, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// Tests that the vocab-parallel cross-entropy ops round-trip, on a shard of
// 5 of the 10 vocab rows with bf16 logits: the statistics are f32.
// CHECK-LABEL: func.func @vocab_cross_entropy
// CHECK-NEXT: %[[M:.*]] = nn.vocab_max %{{.*}} vocab 10 : (tensor<2x4x5xbf16>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[S:.*]] = nn.vocab_stats %{{.*}}, %{{.*}}, %[[M]] vocab 10 : (tensor<2x4x5xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x2xf32>
// CHECK-NEXT: nn.vocab_cross_entropy %[[S]] : (tensor<2x4x2xf32>) -> tensor<f32>
// CHECK-NEXT: nn.vocab_cross_entropy_grad %{{.*}}, %{{.*}}, %[[M]], %[[S]], %{{.*}} scale 1.250000e-01 vocab 10 : (tensor<2x4x5xbf16>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4x2xf32>, tensor<f32>) -> tensor<2x4x5xbf16>
func.func @vocab_cross_entropy(%logits: tensor<2x4x5xbf16>, %labels: tensor<2x4xi32>, %dloss: tensor<f32>) -> (tensor<f32>, tensor<2x4x5xbf16>) {
  %m = nn.vocab_max %logits vocab 10 : (tensor<2x4x5xbf16>) -> tensor<2x4xf32>
  %s = nn.vocab_stats %logits, %labels, %m vocab 10 : (tensor<2x4x5xbf16>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x2xf32>
  %loss = nn.vocab_cross_entropy %s : (tensor<2x4x2xf32>) -> tensor<f32>
  %d = nn.vocab_cross_entropy_grad %logits, %labels, %m, %s, %dloss scale 0.125 vocab 10 : (tensor<2x4x5xbf16>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4x2xf32>, tensor<f32>) -> tensor<2x4x5xbf16>
  return %loss, %d : tensor<f32>, tensor<2x4x5xbf16>
}

// Tests that the backward ops round-trip.
// CHECK-LABEL: func.func @backward
// CHECK: nn.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
// CHECK-NEXT: nn.reduce_sum %{{.*}} dims [0, 1] : (tensor<2x4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: nn.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} epsilon 1.000000e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
// CHECK-NEXT: nn.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} epsilon 1.000000e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NEXT: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x4x8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>)
// CHECK-NEXT: nn.softmax_grad %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.silu_grad %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.gelu_grad %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} scale 1.250000e-01 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x10xf32>
func.func @backward(%ids: tensor<2x4xi32>, %x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>,
                    %g: tensor<8xf32>, %q: tensor<2x4x4x8xf32>, %k: tensor<2x4x2x8xf32>,
                    %do: tensor<2x4x4x8xf32>, %logits: tensor<2x4x10xf32>,
                    %dloss: tensor<f32>) {
  %0 = nn.embedding_grad %ids, %dy : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  %1 = nn.reduce_sum %dy dims [0, 1] : (tensor<2x4x8xf32>) -> tensor<8xf32>
  %2:2 = nn.rms_norm_grad %x, %g, %dy epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %3:3 = nn.layer_norm_grad %x, %g, %dy epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %4:3 = nn.attention_grad %q, %k, %k, %do : (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x4x8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>)
  %5 = nn.softmax_grad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %6 = nn.silu_grad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %7 = nn.gelu_grad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %8 = nn.cross_entropy_grad %logits, %ids, %dloss scale 0.125 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x10xf32>
  return
}
