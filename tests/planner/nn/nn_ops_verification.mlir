// RUN: plan-opt %s -split-input-file -verify-diagnostics

// Tests that nn operands must have static shapes.
func.func @dynamic_shape(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor with non-zero dims of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<?x8xf32>'}}
  %y = nn.silu %x : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Tests that nn operands must not have empty dims.
func.func @zero_dim(%x: tensor<0x8xf32>) -> tensor<0x8xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor with non-zero dims}}
  %y = nn.silu %x : (tensor<0x8xf32>) -> tensor<0x8xf32>
  return %y : tensor<0x8xf32>
}

// -----

// Tests that a declared result type must equal the inferred one.
func.func @wrong_result_type(%x: tensor<2x8xf32>, %w: tensor<8x6xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'nn.linear' op result #0 has type 'tensor<2x5xf32>', but the operands give 'tensor<2x6xf32>'; declare the result as 'tensor<2x6xf32>'}}
  %y = nn.linear %x, %w : (tensor<2x8xf32>, tensor<8x6xf32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// -----

// Tests that nn.param must be a unit attribute.
// expected-error @+1 {{'func.func' op 'nn.param' on argument #0 must be a unit attribute, got: 1 : i64; write it as {nn.param}}}
func.func @param_not_unit(%w: tensor<8xf32> {nn.param = 1}) {
  return
}

// -----

// Tests that nn.param marks float tensors only.
// expected-error @+1 {{'func.func' op 'nn.param' marks argument #0 of type 'tensor<8xi32>', but parameters are float tensors; drop it from token ids and labels}}
func.func @param_on_ids(%ids: tensor<8xi32> {nn.param}) {
  return
}

// -----

// Tests that nn.name must be a non-empty string.
// expected-error @+1 {{'func.func' op 'nn.name' on argument #0 must be a non-empty string, got: ""; write it as {nn.name = "layers.0.attn.wq"}}}
func.func @empty_name(%w: tensor<8xf32> {nn.param, nn.name = ""}) {
  return
}

// -----

// Tests that nn.name names parameters only.
// expected-error @+1 {{'func.func' op 'nn.name' on argument #0 names a value that is not a parameter; add {nn.param} to the argument or drop the name}}
func.func @name_without_param(%w: tensor<8xf32> {nn.name = "w"}) {
  return
}

// -----

// Tests that nn.init names one of the three kinds.
// expected-error @+1 {{'func.func' op 'nn.init' on argument #0 must be {kind = "normal" | "zeros" | "ones", mean = f64, std = f64}, got: {kind = "uniform", mean = 0.000000e+00 : f64, std = 1.000000e+00 : f64}; e.g. {nn.init = {kind = "normal", mean = 0.0, std = 0.02}}}}
func.func @init_kind(%w: tensor<8xf32> {nn.param, nn.init = {kind = "uniform", mean = 0.0, std = 1.0}}) {
  return
}

// -----

// Tests that a normal init has a positive std.
// expected-error @+1 {{'func.func' op 'nn.init' on argument #0 is a normal init with std 0.000000e+00; give it a positive std, or use kind "zeros"}}
func.func @init_normal_std(%w: tensor<8xf32> {nn.param, nn.init = {kind = "normal", mean = 0.0, std = 0.0}}) {
  return
}

// -----

// Tests that nn.init initialises float tensors only.
// expected-error @+1 {{'func.func' op 'nn.init' on argument #0 of type 'tensor<8xi32>' initialises a value that is not a float tensor; drop it from token ids and labels}}
func.func @init_on_ids(%ids: tensor<8xi32> {nn.init = {kind = "zeros", mean = 0.0, std = 0.0}}) {
  return
}

// -----

// Tests that unknown nn argument attributes are rejected.
// expected-error @+1 {{'func.func' op unknown argument attribute 'nn.parameter' on argument #0; the nn dialect defines 'nn.param', 'nn.name' and 'nn.init'}}
func.func @unknown_arg_attr(%w: tensor<8xf32> {nn.parameter}) {
  return
}

// -----

// Tests that the embedding table must be rank 2.
func.func @embedding_table_rank(%ids: tensor<4xi32>, %table: tensor<10x8x2xf32>) {
  // expected-error @+1 {{'nn.embedding' op table must be [vocab, hidden], got: rank 3 ('tensor<10x8x2xf32>'); reshape it to rank 2}}
  %h = nn.embedding %ids, %table : (tensor<4xi32>, tensor<10x8x2xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Tests that the linear input needs a token dim.
func.func @linear_input_rank(%x: tensor<8xf32>, %w: tensor<8x6xf32>) {
  // expected-error @+1 {{'nn.linear' op input must be [tokens..., in] with rank >= 2, got: rank 1 ('tensor<8xf32>'); add the missing leading dims}}
  %y = nn.linear %x, %w : (tensor<8xf32>, tensor<8x6xf32>) -> tensor<6xf32>
  return
}

// -----

// Tests that linear operands share one element type.
func.func @linear_element_types(%x: tensor<2x8xf32>, %w: tensor<8x6xbf16>) {
  // expected-error @+1 {{'nn.linear' op operands must share one element type, got: 'f32' (input) != 'bf16' (weight); convert them to one type}}
  %y = nn.linear %x, %w : (tensor<2x8xf32>, tensor<8x6xbf16>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that the linear weight must be rank 2.
func.func @linear_weight_rank(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'nn.linear' op weight must be [in, out], got: rank 1 ('tensor<8xf32>'); pass a rank-2 weight (a PyTorch [out, in] weight is transposed on import)}}
  %y = nn.linear %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that the linear weight's in dim must match the input.
func.func @linear_in_features(%x: tensor<2x8xf32>, %w: tensor<6x8xf32>) {
  // expected-error @+1 {{'nn.linear' op input features do not match the weight, got: 8 != 6 (input's last dim vs weight dim 0); the weight must be [in, out] with in = the input's last dim}}
  %y = nn.linear %x, %w : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that the linear bias must be [out].
func.func @linear_bias_shape(%x: tensor<2x8xf32>, %w: tensor<8x6xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'nn.linear' op bias must be [out] = [6], got: [8]; pass one bias per output feature}}
  %y = nn.linear %x, %w, %b : (tensor<2x8xf32>, tensor<8x6xf32>, tensor<8xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that the linear bias shares the input's element type.
func.func @linear_bias_element_type(%x: tensor<2x8xf32>, %w: tensor<8x6xf32>, %b: tensor<6xf16>) {
  // expected-error @+1 {{'nn.linear' op operands must share one element type, got: 'f32' (input) != 'f16' (bias); convert them to one type}}
  %y = nn.linear %x, %w, %b : (tensor<2x8xf32>, tensor<8x6xf32>, tensor<6xf16>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that nn.matmul takes at most one transpose flag.
func.func @matmul_both_flags(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.matmul' op transpose_lhs and transpose_rhs cannot both be set; set at most one of them}}
  %c = nn.matmul %a, %b transpose_lhs transpose_rhs : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x2xf32>
  return
}

// -----

// Tests that the matmul lhs needs rank >= 2.
func.func @matmul_lhs_rank(%a: tensor<8xf32>, %b: tensor<8x6xf32>) {
  // expected-error @+1 {{'nn.matmul' op lhs must be [tokens..., x] with rank >= 2, got: rank 1 ('tensor<8xf32>'); add the missing leading dims}}
  %c = nn.matmul %a, %b : (tensor<8xf32>, tensor<8x6xf32>) -> tensor<6xf32>
  return
}

// -----

// Tests that matmul operands share one element type.
func.func @matmul_element_types(%a: tensor<2x8xf16>, %b: tensor<8x6xf32>) {
  // expected-error @+1 {{'nn.matmul' op operands must share one element type, got: 'f16' (lhs) != 'f32' (rhs); convert them to one type}}
  %c = nn.matmul %a, %b : (tensor<2x8xf16>, tensor<8x6xf32>) -> tensor<2x6xf16>
  return
}

// -----

// Tests that transpose_lhs needs equal leading dims.
func.func @matmul_transpose_lhs_dims(%a: tensor<2x4x8xf32>, %b: tensor<2x3x6xf32>) {
  // expected-error @+1 {{'nn.matmul' op with transpose_lhs, lhs and rhs must share their leading dims, got: [2, 4] != [2, 3]; pass lhs [T..., m] and rhs [T..., n]}}
  %c = nn.matmul %a, %b transpose_lhs : (tensor<2x4x8xf32>, tensor<2x3x6xf32>) -> tensor<8x6xf32>
  return
}

// -----

// Tests that the matmul rhs is rank 2 without transpose_lhs.
func.func @matmul_rhs_rank(%a: tensor<2x8xf32>, %b: tensor<2x8x6xf32>) {
  // expected-error @+1 {{'nn.matmul' op rhs must be rank 2, got: rank 3 ('tensor<2x8x6xf32>'); only transpose_lhs takes a rhs with leading dims}}
  %c = nn.matmul %a, %b : (tensor<2x8xf32>, tensor<2x8x6xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that the matmul contracting dims must match.
func.func @matmul_contracting(%a: tensor<2x8xf32>, %b: tensor<6x8xf32>) {
  // expected-error @+1 {{'nn.matmul' op contracting dims differ, got: 8 != 6 (lhs's last dim vs rhs dim 0); rhs must be [k, n] with k = the lhs's last dim}}
  %c = nn.matmul %a, %b : (tensor<2x8xf32>, tensor<6x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that with transpose_rhs the contracting dim is rhs's last.
func.func @matmul_contracting_transposed(%a: tensor<2x8xf32>, %b: tensor<8x6xf32>) {
  // expected-error @+1 {{'nn.matmul' op contracting dims differ, got: 8 != 6 (lhs's last dim vs rhs dim 1); with transpose_rhs, rhs must be [n, k] with k = the lhs's last dim}}
  %c = nn.matmul %a, %b transpose_rhs : (tensor<2x8xf32>, tensor<8x6xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that norms need an input of rank >= 1.
func.func @norm_input_rank(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'nn.rms_norm' op input must be [tokens..., hidden] with rank >= 1, got: rank 0 ('tensor<f32>'); add the missing leading dims}}
  %y = nn.rms_norm %x, %g epsilon 1.0e-05 : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

// Tests that gamma must be [hidden].
func.func @rms_norm_gamma(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'nn.rms_norm' op gamma must be [hidden] = [8], got: [4]; pass one value per feature of the input's last dim}}
  %y = nn.rms_norm %x, %g epsilon 1.0e-05 : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that gamma shares the input's element type.
func.func @rms_norm_gamma_type(%x: tensor<2x8xf32>, %g: tensor<8xbf16>) {
  // expected-error @+1 {{'nn.rms_norm' op operands must share one element type, got: 'f32' (input) != 'bf16' (gamma); convert them to one type}}
  %y = nn.rms_norm %x, %g epsilon 1.0e-05 : (tensor<2x8xf32>, tensor<8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that the rms_norm epsilon must be positive.
func.func @rms_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'nn.rms_norm' op epsilon must be positive and finite, got: 0; use a value such as 1e-05}}
  %y = nn.rms_norm %x, %g epsilon 0.0 : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that beta must be [hidden].
func.func @layer_norm_beta(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op beta must be [hidden] = [8], got: [2, 8]; pass one value per feature of the input's last dim}}
  %y = nn.layer_norm %x, %g, %b epsilon 1.0e-05 : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that the layer_norm epsilon must be positive.
func.func @layer_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op epsilon must be positive and finite, got: -1; use a value such as 1e-05}}
  %y = nn.layer_norm %x, %g, %g epsilon -1.0 : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that rope needs [batch, seq, heads, head_dim].
func.func @rope_rank(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.rope' op input must be [batch, seq, heads, head_dim], got: rank 3 ('tensor<2x4x8xf32>'); reshape it to rank 4}}
  %y = nn.rope %x theta 1.0e+04 : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Tests that rope needs an even head_dim.
func.func @rope_odd_head_dim(%x: tensor<2x4x2x7xf32>) {
  // expected-error @+1 {{'nn.rope' op head_dim must be even, got: 7; rope rotates pairs of features (i, i + head_dim/2)}}
  %y = nn.rope %x theta 1.0e+04 : (tensor<2x4x2x7xf32>) -> tensor<2x4x2x7xf32>
  return
}

// -----

// Tests that the rope theta must be positive.
func.func @rope_theta(%x: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.rope' op theta must be positive and finite, got: 0; use a value such as 10000.0}}
  %y = nn.rope %x theta 0.0 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that a rope scaling factor must be positive.
func.func @rope_scaling_factor(%x: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.rope' op scaling_factor must be positive and finite, got: -2; use a value such as 8.0}}
  %y = nn.rope %x theta 1.0e+04 scaling_factor -2.0 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that llama3 bands need the scaling factor they divide by.
func.func @rope_bands_without_factor(%x: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.rope' op llama3 scaling needs scaling_factor, low_freq_factor, high_freq_factor and original_max_positions together, got: 3 of the 4; give all four, or scaling_factor alone for linear scaling}}
  %y = nn.rope %x theta 1.0e+04 low_freq_factor 1.0 high_freq_factor 4.0 original_max_positions 64 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that the llama3 bands are ordered.
func.func @rope_bands_order(%x: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.rope' op high_freq_factor must be finite and above low_freq_factor, got: 1 <= 4; Llama 3.1 uses 4.0 and 1.0}}
  %y = nn.rope %x theta 1.0e+04 scaling_factor 8.0 low_freq_factor 4.0 high_freq_factor 1.0 original_max_positions 64 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that the original context length is positive.
func.func @rope_bands_original(%x: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.rope' op original_max_positions must be positive, got: 0; it is the context length the model was trained with, e.g. 8192}}
  %y = nn.rope %x theta 1.0e+04 scaling_factor 8.0 low_freq_factor 1.0 high_freq_factor 4.0 original_max_positions 0 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that attention needs a rank-4 query.
func.func @attention_query_rank(%q: tensor<2x4x8xf32>, %k: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.attention' op query must be [batch, seq, heads, head_dim], got: rank 3 ('tensor<2x4x8xf32>'); reshape it to rank 4}}
  %o = nn.attention %q, %k, %k : (tensor<2x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Tests that attention needs a rank-4 key.
func.func @attention_key_rank(%q: tensor<2x4x2x8xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key must be [batch, seq, kv_heads, head_dim], got: rank 3 ('tensor<2x4x16xf32>'); reshape it to rank 4}}
  %o = nn.attention %q, %k, %v : (tensor<2x4x2x8xf32>, tensor<2x4x16xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that key and value share one shape.
func.func @attention_key_value(%q: tensor<2x4x2x8xf32>, %k: tensor<2x4x2x8xf32>, %v: tensor<2x4x1x8xf32>) {
  // expected-error @+1 {{'nn.attention' op key and value must have one shape, got: [2, 4, 2, 8] != [2, 4, 1, 8]; project both to [batch, seq, kv_heads, head_dim]}}
  %o = nn.attention %q, %k, %v : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x1x8xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that query and key share the batch size.
func.func @attention_batch(%q: tensor<3x4x2x8xf32>, %k: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.attention' op query and key batch sizes differ, got: 3 != 2; use one batch for all three}}
  %o = nn.attention %q, %k, %k : (tensor<3x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<3x4x2x8xf32>
  return
}

// -----

// Tests that causal self-attention needs one sequence length.
func.func @attention_seq(%q: tensor<2x4x2x8xf32>, %k: tensor<2x6x2x8xf32>) {
  // expected-error @+1 {{'nn.attention' op query and key sequence lengths differ, got: 4 != 6; causal self-attention reads queries and keys of one sequence}}
  %o = nn.attention %q, %k, %k : (tensor<2x4x2x8xf32>, tensor<2x6x2x8xf32>, tensor<2x6x2x8xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that query and key share head_dim.
func.func @attention_head_dim(%q: tensor<2x4x2x8xf32>, %k: tensor<2x4x2x4xf32>) {
  // expected-error @+1 {{'nn.attention' op query and key head_dim differ, got: 8 != 4; use one head_dim for query, key and value}}
  %o = nn.attention %q, %k, %k : (tensor<2x4x2x8xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that grouped-query attention needs kv heads that divide heads.
func.func @attention_heads(%q: tensor<2x4x6x8xf32>, %k: tensor<2x4x4x8xf32>) {
  // expected-error @+1 {{'nn.attention' op query heads must be a multiple of kv heads, got: 6 % 4 = 2; choose kv_heads that divide heads}}
  %o = nn.attention %q, %k, %k : (tensor<2x4x6x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x6x8xf32>
  return
}

// -----

// Tests that attention operands share one element type.
func.func @attention_element_types(%q: tensor<2x4x2x8xf32>, %k: tensor<2x4x2x8xbf16>) {
  // expected-error @+1 {{'nn.attention' op operands must share one element type, got: 'f32' (query) != 'bf16' (key); convert them to one type}}
  %o = nn.attention %q, %k, %k : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xbf16>, tensor<2x4x2x8xbf16>) -> tensor<2x4x2x8xf32>
  return
}

// -----

// Tests that nn.add does not broadcast.
func.func @add_broadcast(%a: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'nn.add' op rhs must have the type of lhs, got: 'tensor<8xf32>' != 'tensor<2x8xf32>'; nn.add does not broadcast, give both operands one shape and type}}
  %c = nn.add %a, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that nn.mul does not broadcast.
func.func @mul_types(%a: tensor<2x8xf32>, %b: tensor<2x8xf16>) {
  // expected-error @+1 {{'nn.mul' op rhs must have the type of lhs, got: 'tensor<2x8xf16>' != 'tensor<2x8xf32>'; nn.mul does not broadcast, give both operands one shape and type}}
  %c = nn.mul %a, %b : (tensor<2x8xf32>, tensor<2x8xf16>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that softmax needs a dim to normalize over.
func.func @softmax_rank(%x: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax' op input must be [rows..., n] with rank >= 1, got: rank 0 ('tensor<f32>'); add the missing leading dims}}
  %y = nn.softmax %x : (tensor<f32>) -> tensor<f32>
  return
}

// -----

// Tests that a reshape keeps the element type.
func.func @reshape_element_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.reshape' op changes the element type, got: 'f32' -> 'bf16'; a reshape keeps the element type}}
  %y = nn.reshape %x : (tensor<2x8xf32>) -> tensor<16xbf16>
  return
}

// -----

// Tests that a reshape keeps the element count.
func.func @reshape_count(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.reshape' op changes the element count, got: 16 [2, 8] != 18 [3, 6]; the two shapes must have equal products}}
  %y = nn.reshape %x : (tensor<2x8xf32>) -> tensor<3x6xf32>
  return
}

// -----

// Tests that a reshape may only split and merge dims.
func.func @reshape_not_nested(%x: tensor<4x2x3xf32>) {
  // expected-error @+1 {{'nn.reshape' op does not only split and merge dims, got: [2, 3] -> [3, 2]; reshape through the merged shape [6] with two reshapes}}
  %y = nn.reshape %x : (tensor<4x2x3xf32>) -> tensor<4x3x2xf32>
  return
}

// -----

// Tests that a transpose permutation lists every dim once.
func.func @transpose_permutation(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.transpose' op permutation must list each dim of [0, 3) once, got: [0, 0, 1]; give one entry per input dim}}
  %y = nn.transpose %x permutation [0, 0, 1] : (tensor<2x4x8xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

// Tests that cross_entropy needs a token dim on the logits.
func.func @cross_entropy_rank(%logits: tensor<10xf32>, %labels: tensor<i32>) {
  // expected-error @+1 {{'nn.cross_entropy' op logits must be [tokens..., vocab] with rank >= 2, got: rank 1 ('tensor<10xf32>'); add the missing leading dims}}
  %loss = nn.cross_entropy %logits, %labels : (tensor<10xf32>, tensor<i32>) -> tensor<f32>
  return
}

// -----

// Tests that cross_entropy needs one label per token.
func.func @cross_entropy_labels(%logits: tensor<2x4x10xf32>, %labels: tensor<2x5xi32>) {
  // expected-error @+1 {{'nn.cross_entropy' op labels must be [2, 4] (the logits without the vocab dim), got: [2, 5]; give one label per token}}
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x4x10xf32>, tensor<2x5xi32>) -> tensor<f32>
  return
}

// -----

// Tests that embedding_grad needs result_grad [ids..., hidden].
func.func @embedding_grad_result_grad(%ids: tensor<2x4xi32>, %dy: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'nn.embedding_grad' op result_grad must be [ids..., hidden] with ids [2, 4], got: [2, 3, 8]; pass the cotangent of nn.embedding's result}}
  %d = nn.embedding_grad %ids, %dy : (tensor<2x4xi32>, tensor<2x3x8xf32>) -> tensor<10x8xf32>
  return
}

// -----

// Tests that embedding_grad returns a [vocab, hidden] table.
func.func @embedding_grad_result(%ids: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.embedding_grad' op result must be [vocab, 8], got: [10, 6]; declare the embedding table's type}}
  %d = nn.embedding_grad %ids, %dy : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x6xf32>
  return
}

// -----

// Tests that embedding_grad keeps result_grad's element type.
func.func @embedding_grad_element_type(%ids: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.embedding_grad' op result must have result_grad's element type, got: 'bf16' != 'f32'; declare the result with 'f32'}}
  %d = nn.embedding_grad %ids, %dy : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xbf16>
  return
}

// -----

// Tests that reduce_sum dims are strictly increasing and in range.
func.func @reduce_sum_dims(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op dims must be strictly increasing and in [0, 3), got: [1, 0]; sort them and drop repeats}}
  %y = nn.reduce_sum %x dims [1, 0] : (tensor<2x4x8xf32>) -> tensor<8xf32>
  return
}

// -----

// Tests that rms_norm_grad needs a result_grad of the input's type.
func.func @rms_norm_grad_result_grad(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.rms_norm_grad' op result_grad must have the type of input, got: 'tensor<4x8xf32>' != 'tensor<2x8xf32>'; pass the cotangent of the norm's result}}
  %dx, %dg = nn.rms_norm_grad %x, %g, %dy epsilon 1.0e-05 : (tensor<2x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that the rms_norm_grad epsilon must be positive.
func.func @rms_norm_grad_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'nn.rms_norm_grad' op epsilon must be positive and finite, got: 0; use a value such as 1e-05}}
  %dx, %dg = nn.rms_norm_grad %x, %g, %x epsilon 0.0 : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that layer_norm_grad checks gamma.
func.func @layer_norm_grad_gamma(%x: tensor<2x8xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{'nn.layer_norm_grad' op gamma must be [hidden] = [8], got: [6]; pass one value per feature of the input's last dim}}
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %x epsilon 1.0e-05 : (tensor<2x8xf32>, tensor<6xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<6xf32>, tensor<6xf32>)
  return
}

// -----

// Tests that the layer_norm_grad epsilon must be positive.
func.func @layer_norm_grad_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layer_norm_grad' op epsilon must be positive and finite, got: 0; use a value such as 1e-05}}
  %dx, %dg, %db = nn.layer_norm_grad %x, %g, %x epsilon 0.0 : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that attention_grad checks its attention operands.
func.func @attention_grad_heads(%q: tensor<2x4x3x8xf32>, %k: tensor<2x4x2x8xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op query heads must be a multiple of kv heads, got: 3 % 2 = 1; choose kv_heads that divide heads}}
  %dq, %dk, %dv = nn.attention_grad %q, %k, %k, %q : (tensor<2x4x3x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x3x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>)
  return
}

// -----

// Tests that attention_grad needs a result_grad of the query's type.
func.func @attention_grad_result_grad(%q: tensor<2x4x2x8xf32>, %do: tensor<2x4x2x4xf32>) {
  // expected-error @+1 {{'nn.attention_grad' op result_grad must have the type of query, got: 'tensor<2x4x2x4xf32>' != 'tensor<2x4x2x8xf32>'; pass the cotangent of nn.attention's result}}
  %dq, %dk, %dv = nn.attention_grad %q, %q, %q, %do : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x4xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>)
  return
}

// -----

// Tests that softmax_grad needs a dim to normalize over.
func.func @softmax_grad_rank(%y: tensor<f32>) {
  // expected-error @+1 {{'nn.softmax_grad' op output must be [rows..., n] with rank >= 1, got: rank 0 ('tensor<f32>'); add the missing leading dims}}
  %dx = nn.softmax_grad %y, %y : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

// Tests that softmax_grad needs a result_grad of the output's type.
func.func @softmax_grad_types(%y: tensor<2x8xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.softmax_grad' op result_grad must have the type of output, got: 'tensor<2x4xf32>' != 'tensor<2x8xf32>'; pass the cotangent of nn.softmax's result}}
  %dx = nn.softmax_grad %y, %dy : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that silu_grad needs a result_grad of the input's type.
func.func @silu_grad_types(%x: tensor<2x8xf32>, %dy: tensor<2x8xbf16>) {
  // expected-error @+1 {{'nn.silu_grad' op result_grad must have the type of input, got: 'tensor<2x8xbf16>' != 'tensor<2x8xf32>'; pass the cotangent of nn.silu's result}}
  %dx = nn.silu_grad %x, %dy : (tensor<2x8xf32>, tensor<2x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that gelu_grad needs a result_grad of the input's type.
func.func @gelu_grad_types(%x: tensor<2x8xf32>, %dy: tensor<8xf32>) {
  // expected-error @+1 {{'nn.gelu_grad' op result_grad must have the type of input, got: 'tensor<8xf32>' != 'tensor<2x8xf32>'; pass the cotangent of nn.gelu's result}}
  %dx = nn.gelu_grad %x, %dy : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that cross_entropy_grad checks its labels.
func.func @cross_entropy_grad_labels(%logits: tensor<2x4x10xf32>, %labels: tensor<4xi32>, %dloss: tensor<f32>) {
  // expected-error @+1 {{'nn.cross_entropy_grad' op labels must be [2, 4] (the logits without the vocab dim), got: [4]; give one label per token}}
  %d = nn.cross_entropy_grad %logits, %labels, %dloss scale 0.125 : (tensor<2x4x10xf32>, tensor<4xi32>, tensor<f32>) -> tensor<2x4x10xf32>
  return
}

// -----

// Tests that the cross_entropy_grad scale must be positive.
func.func @cross_entropy_grad_scale(%logits: tensor<2x4x10xf32>, %labels: tensor<2x4xi32>, %dloss: tensor<f32>) {
  // expected-error @+1 {{'nn.cross_entropy_grad' op scale must be positive and finite, got: 0; use a value such as 1 / number of tokens}}
  %d = nn.cross_entropy_grad %logits, %labels, %dloss scale 0.0 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x10xf32>
  return
}

// -----

// Tests that the bias of nn.bias_add has one value per feature.
func.func @bias_add_shape(%x: tensor<2x4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'nn.bias_add' op bias must be [out] = [8], got: [4]; pass one bias per feature of the input's last dim}}
  %y = nn.bias_add %x, %b : (tensor<2x4x8xf32>, tensor<4xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Tests that nn.bias_add's operands share one element type.
func.func @bias_add_type(%x: tensor<2x8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+1 {{'nn.bias_add' op operands must share one element type, got: 'f32' (input) != 'bf16' (bias); convert them to one type}}
  %y = nn.bias_add %x, %b : (tensor<2x8xf32>, tensor<8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that vocab covers the logits' last dim (a shard holds at most the
// whole vocab).
func.func @vocab_max_vocab(%logits: tensor<2x4x10xf32>) {
  // expected-error @+1 {{'nn.vocab_max' op vocab must be at least the logits' last dim 10, got: 8; set it to the global vocab size (the logits' last dim before sharding)}}
  %m = nn.vocab_max %logits vocab 8 : (tensor<2x4x10xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Tests that nn.vocab_max needs a token dim.
func.func @vocab_max_rank(%logits: tensor<10xf32>) {
  // expected-error @+1 {{'nn.vocab_max' op logits must be [tokens..., vocab] with rank >= 2, got: rank 1 ('tensor<10xf32>'); add the missing leading dims}}
  %m = nn.vocab_max %logits vocab 10 : (tensor<10xf32>) -> tensor<f32>
  return
}

// -----

// Tests that nn.vocab_max's result is f32 whatever the logits' type.
func.func @vocab_max_result(%logits: tensor<2x10xbf16>) {
  // expected-error @+1 {{'nn.vocab_max' op result #0 must be statically shaped tensor with non-zero dims of 32-bit float values, but got 'tensor<2xbf16>'}}
  %m = nn.vocab_max %logits vocab 10 : (tensor<2x10xbf16>) -> tensor<2xbf16>
  return
}

// -----

// Tests that nn.vocab_stats checks its labels.
func.func @vocab_stats_labels(%logits: tensor<2x4x10xf32>, %labels: tensor<2xi32>, %m: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.vocab_stats' op labels must be [2, 4] (the logits without the vocab dim), got: [2]; give one label per token}}
  %s = nn.vocab_stats %logits, %labels, %m vocab 10 : (tensor<2x4x10xf32>, tensor<2xi32>, tensor<2x4xf32>) -> tensor<2x4x2xf32>
  return
}

// -----

// Tests that nn.vocab_stats takes one max per token.
func.func @vocab_stats_max(%logits: tensor<2x4x10xf32>, %labels: tensor<2x4xi32>, %m: tensor<2xf32>) {
  // expected-error @+1 {{'nn.vocab_stats' op max must be [2, 4] (one value per token), got: [2]; pass the result of nn.vocab_max}}
  %s = nn.vocab_stats %logits, %labels, %m vocab 10 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<2xf32>) -> tensor<2x4x2xf32>
  return
}

// -----

// Tests that nn.vocab_cross_entropy reads [tokens..., 2] statistics.
func.func @vocab_cross_entropy_stats(%s: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'nn.vocab_cross_entropy' op stats must be [2, 4, 2] (sum of exponentials, label logit per token), got: [2, 4, 3]; pass the result of nn.vocab_stats}}
  %loss = nn.vocab_cross_entropy %s : (tensor<2x4x3xf32>) -> tensor<f32>
  return
}

// -----

// Tests that nn.vocab_cross_entropy needs a token dim.
func.func @vocab_cross_entropy_rank(%s: tensor<2xf32>) {
  // expected-error @+1 {{'nn.vocab_cross_entropy' op stats must be [tokens..., 2] with rank >= 2, got: rank 1 ('tensor<2xf32>'); add the missing leading dims}}
  %loss = nn.vocab_cross_entropy %s : (tensor<2xf32>) -> tensor<f32>
  return
}

// -----

// Tests that nn.vocab_cross_entropy_grad checks its statistics.
func.func @vocab_grad_stats(%logits: tensor<2x4x10xf32>, %labels: tensor<2x4xi32>, %m: tensor<2x4xf32>, %s: tensor<2x2xf32>, %dloss: tensor<f32>) {
  // expected-error @+1 {{'nn.vocab_cross_entropy_grad' op stats must be [2, 4, 2] (sum of exponentials, label logit per token), got: [2, 2]; pass the result of nn.vocab_stats}}
  %d = nn.vocab_cross_entropy_grad %logits, %labels, %m, %s, %dloss scale 0.125 vocab 10 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x4x10xf32>
  return
}

// -----

// Tests that the nn.vocab_cross_entropy_grad scale must be positive.
func.func @vocab_grad_scale(%logits: tensor<2x4x10xf32>, %labels: tensor<2x4xi32>, %m: tensor<2x4xf32>, %s: tensor<2x4x2xf32>, %dloss: tensor<f32>) {
  // expected-error @+1 {{'nn.vocab_cross_entropy_grad' op scale must be positive and finite, got: -1; use a value such as 1 / number of tokens}}
  %d = nn.vocab_cross_entropy_grad %logits, %labels, %m, %s, %dloss scale -1.0 vocab 10 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4x2xf32>, tensor<f32>) -> tensor<2x4x10xf32>
  return
}
