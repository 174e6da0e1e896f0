// Ops of the `nn` dialect. Forward ops describe models; backward ops are what
// the forward ops' vector-Jacobian products emit, so a training step (forward
// + backward) is expressed in this one dialect. The math of every op is exact
// and spelled out here and in docs/planner_nn.md.
#ifndef LOOM_PLANNER_DIALECT_NN_IR_NN_OPS_TD_
#define LOOM_PLANNER_DIALECT_NN_IR_NN_OPS_TD_

include "mlir/IR/CommonAttrConstraints.td"
include "planner/dialect/nn/ir/nn_base.td"

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def Nn_EmbeddingOp : Nn_DifferentiableOp<"embedding", [], ["getBytesMoved"]> {
  let summary = "looks up rows of an embedding table";
  let description = [{
    `result[t..., h] = table[ids[t...], h]`. `ids` has any shape `[T...]`
    (usually `[batch, seq]`), `table` is `[vocab, hidden]`, the result is
    `[T..., hidden]` with the table's element type. Every id must lie in
    `[0, vocab)`.

    Example:

    ```mlir
    %h = nn.embedding %ids, %table
        : (tensor<2x16xi32>, tensor<1000x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_IntTensor:$ids, Nn_FloatTensor:$table);
  let results = (outs Nn_FloatTensor:$result);
}

def Nn_LinearOp : Nn_DifferentiableOp<"linear"> {
  let summary = "matrix product with a [in, out] weight and an optional bias";
  let description = [{
    `result[t..., o] = sum_i input[t..., i] * weight[i, o] + bias[o]`.
    `input` is `[T..., in]` (rank >= 2), `weight` is `[in, out]` (a PyTorch
    importer transposes `nn.Linear`'s `[out, in]` weight), `bias` is `[out]`
    and may be omitted. All operands share one element type.

    Example:

    ```mlir
    %y = nn.linear %x, %w, %b
        : (tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>)
        -> tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, Nn_FloatTensor:$weight,
                       Optional<Nn_FloatTensor>:$bias);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Nn_BiasAddOp : Nn_DifferentiableOp<"bias_add"> {
  let summary = "adds a per-feature bias along the last dim";
  let description = [{
    `result[t..., o] = input[t..., o] + bias[o]`. `input` is `[T..., out]`
    (rank >= 1), `bias` is `[out]`, both of one element type. `nn.linear`
    with a bias is `nn.linear` without it followed by this op;
    `plan-placement` splits a row-parallel linear that way, so that the
    bias is added once, after the all-reduce of the partial product.

    Example:

    ```mlir
    %y = nn.bias_add %x, %b
        : (tensor<2x16x256xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, Nn_FloatTensor:$bias);
  let results = (outs Nn_FloatTensor:$result);
}

def Nn_MatmulOp : Nn_DifferentiableOp<"matmul"> {
  let summary = "matrix product in one of three layouts (used by backward graphs)";
  let description = [{
    `lhs` has rank >= 2 and is read as `[T..., x]`; T are its leading dims.

    * default: `lhs [T..., k]`, `rhs [k, n]` -> `[T..., n]`,
      `result[t..., j] = sum_k lhs[t..., k] * rhs[k, j]`;
    * `transpose_rhs`: `lhs [T..., k]`, `rhs [n, k]` -> `[T..., n]`,
      `result[t..., j] = sum_k lhs[t..., k] * rhs[j, k]`;
    * `transpose_lhs`: `lhs [T..., m]`, `rhs [T..., n]` -> `[m, n]`,
      `result[i, j] = sum_t lhs[t..., i] * rhs[t..., j]` (the leading dims
      are contracted, as in a weight gradient `x^T dy`).

    With rank-2 operands these are `A B`, `A B^T` and `A^T B`. At most one
    flag may be set. Operands share one element type.

    Example:

    ```mlir
    %dw = nn.matmul %x, %dy transpose_lhs
        : (tensor<2x16x64xf32>, tensor<2x16x256xf32>) -> tensor<64x256xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$lhs, Nn_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)? (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Nn_RmsNormOp : Nn_DifferentiableOp<"rms_norm"> {
  let summary = "root-mean-square normalization over the last dim";
  let description = [{
    `result[t..., h] = input[t..., h] / sqrt(mean_h'(input[t..., h']^2) + epsilon)
    * gamma[h]`. `input` is `[T..., hidden]` (rank >= 1), `gamma` is
    `[hidden]`, `epsilon` > 0.

    Example:

    ```mlir
    %y = nn.rms_norm %x, %g epsilon 1.0e-05
        : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, Nn_FloatTensor:$gamma,
                       F64Attr:$epsilon);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `epsilon` $epsilon attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Nn_LayerNormOp : Nn_DifferentiableOp<"layer_norm"> {
  let summary = "layer normalization over the last dim";
  let description = [{
    With `mu = mean_h(input[t..., h])` and the biased variance
    `var = mean_h((input[t..., h] - mu)^2)`:
    `result[t..., h] = (input[t..., h] - mu) / sqrt(var + epsilon) * gamma[h]
    + beta[h]`. `input` is `[T..., hidden]` (rank >= 1), `gamma` and `beta`
    are `[hidden]`, `epsilon` > 0.

    Example:

    ```mlir
    %y = nn.layer_norm %x, %g, %b epsilon 1.0e-05
        : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, Nn_FloatTensor:$gamma,
                       Nn_FloatTensor:$beta, F64Attr:$epsilon);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta `epsilon` $epsilon attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Nn_RopeOp : Nn_DifferentiableOp<"rope"> {
  let summary = "rotary position embedding (rotate-half pairing)";
  let description = [{
    `input` is `[batch, seq, heads, head_dim]` with an even `head_dim` = 2P.
    For position `s` (the seq index, from 0) and `i < P`, with
    `a = s * theta^(-2i / head_dim)` (negated when `inverse` is set):
    `result[.., s, .., i] = x[i] cos(a) - x[i + P] sin(a)` and
    `result[.., s, .., i + P] = x[i + P] cos(a) + x[i] sin(a)`, where `x` is
    `input[.., s, .., :]`. This is the rotate-half pairing of GPT-NeoX and
    Hugging Face Llama. `inverse` rotates by the opposite angle; since the
    rotation is orthogonal it is also the op's vector-Jacobian product.

    Long-context checkpoints scale the frequencies `theta^(-2i / head_dim)`
    (Hugging Face's `rope_scaling`). With `scaling_factor` alone every
    frequency is divided by it ("linear"). With `low_freq_factor`,
    `high_freq_factor` and `original_max_positions` as well, Llama 3.1's
    bands apply ("llama3"): with wavelength `w = 2 pi / frequency` and
    `n = original_max_positions`, frequencies with `w < n / high_freq_factor`
    are kept, those with `w > n / low_freq_factor` divided by
    `scaling_factor`, and those between interpolated with
    `t = (n / w - low_freq_factor) / (high_freq_factor - low_freq_factor)`:
    `(1 - t) * frequency / scaling_factor + t * frequency`.
    `plan/rope_frequency.h` is the one definition every kernel uses.

    Example:

    ```mlir
    %qr = nn.rope %q theta 1.0e+04
        : (tensor<2x16x8x32xf32>) -> tensor<2x16x8x32xf32>
    %q2 = nn.rope %qr theta 1.0e+04 inverse
        : (tensor<2x16x8x32xf32>) -> tensor<2x16x8x32xf32>
    %q3 = nn.rope %q theta 5.0e+05 scaling_factor 8.0
        low_freq_factor 1.0 high_freq_factor 4.0 original_max_positions 8192
        : (tensor<2x16x8x32xf32>) -> tensor<2x16x8x32xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, F64Attr:$theta,
                       UnitAttr:$inverse,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<I64Attr>:$original_max_positions);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `theta` $theta (`inverse` $inverse^)?
    (`scaling_factor` $scaling_factor^)?
    (`low_freq_factor` $low_freq_factor^ `high_freq_factor` $high_freq_factor
     `original_max_positions` $original_max_positions)?
    attr-dict `:` functional-type(operands, results)
  }];
  // Builds the scaling attributes from the kernels' struct (its defaults:
  // none of them).
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::FloatAttr":$theta,
                   CArg<"bool", "false">:$inverse,
                   CArg<"const ::loom::plan::RopeScaling&", "{}">:$scaling)>
  ];
  let extraClassDeclaration = [{
    // The scaling attributes as the kernels take them (none: the defaults).
    ::loom::plan::RopeScaling getScaling();
  }];
  let hasVerifier = 1;
}

def Nn_AttentionOp : Nn_DifferentiableOp<"attention"> {
  let summary = "causal scaled-dot-product attention, multi-head or grouped-query";
  let description = [{
    `query` is `[batch, seq, heads, head_dim]`; `key` and `value` are
    `[batch, seq, kv_heads, head_dim]` with `heads % kv_heads == 0`. Query
    head `h` uses kv head `h / (heads / kv_heads)` (kv heads are repeated).
    With `scale = 1 / sqrt(head_dim)`:
    `score[b, h, i, j] = scale * sum_d query[b, i, h, d] * key[b, j, h', d]`
    for `j <= i` (causal: keys after the query are masked out),
    `p = softmax_j(score)` and
    `result[b, i, h, d] = sum_{j <= i} p[b, h, i, j] * value[b, j, h', d]`.
    The result has the query's type.

    Example:

    ```mlir
    %o = nn.attention %q, %k, %v
        : (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>)
        -> tensor<2x16x8x32xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$query, Nn_FloatTensor:$key,
                       Nn_FloatTensor:$value);
  let results = (outs Nn_FloatTensor:$result);
}

def Nn_SiluOp : Nn_DifferentiableOp<"silu"> {
  let summary = "sigmoid-weighted linear unit, x * sigmoid(x)";
  let description = [{
    `result = input / (1 + exp(-input))`, elementwise.

    Example:

    ```mlir
    %y = nn.silu %x : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input);
  let results = (outs Nn_FloatTensor:$result);
}

def Nn_GeluOp : Nn_DifferentiableOp<"gelu"> {
  let summary = "gaussian error linear unit, tanh approximation";
  let description = [{
    `result = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`,
    elementwise: the tanh approximation (GPT-2's `gelu_new`, PyTorch's
    `gelu(approximate="tanh")`), not the erf form.

    Example:

    ```mlir
    %y = nn.gelu %x : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input);
  let results = (outs Nn_FloatTensor:$result);
}

def Nn_AddOp : Nn_DifferentiableOp<"add", [Commutative]> {
  let summary = "elementwise sum of two tensors of one type";
  let description = [{
    `result = lhs + rhs`. Both operands have the same type; there is no
    broadcasting.

    Example:

    ```mlir
    %y = nn.add %a, %b : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$lhs, Nn_FloatTensor:$rhs);
  let results = (outs Nn_FloatTensor:$result);
}

def Nn_MulOp : Nn_DifferentiableOp<"mul", [Commutative]> {
  let summary = "elementwise product of two tensors of one type";
  let description = [{
    `result = lhs * rhs`. Both operands have the same type; there is no
    broadcasting.

    Example:

    ```mlir
    %y = nn.mul %a, %b : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$lhs, Nn_FloatTensor:$rhs);
  let results = (outs Nn_FloatTensor:$result);
}

def Nn_SoftmaxOp : Nn_DifferentiableOp<"softmax"> {
  let summary = "softmax over the last dim";
  let description = [{
    `result[t..., j] = exp(input[t..., j]) / sum_j' exp(input[t..., j'])`
    (computed with the row maximum subtracted). `input` has rank >= 1.

    Example:

    ```mlir
    %p = nn.softmax %x : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input);
  let results = (outs Nn_FloatTensor:$result);
}

def Nn_ReshapeOp : Nn_Op<"reshape", [DeclareOpInterfaceMethods<Nn_VjpOpInterface>]> {
  let summary = "reinterprets a row-major tensor with another shape";
  let description = [{
    The elements, in row-major order, are unchanged; the result type gives
    the new shape. The element count and type are kept, and the reshape must
    only split and merge dimensions: both shapes must refine into one list of
    factors (e.g. `[2, 6] -> [2, 2, 3]` or `[4, 6] -> [2, 12]`, but not
    `[2, 3] -> [3, 2]`), so that shardings can pass through it.

    Example:

    ```mlir
    %q = nn.reshape %x : (tensor<2x16x256xf32>) -> tensor<2x16x8x32xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Nn_TransposeOp : Nn_DifferentiableOp<"transpose"> {
  let summary = "permutes the dimensions of a tensor";
  let description = [{
    Result dim `i` is input dim `permutation[i]`: `result[j] = input[k]`
    with `k[permutation[i]] = j[i]` for every `i`; `permutation` lists each
    of `0 .. rank-1` once.

    Example:

    ```mlir
    %y = nn.transpose %x permutation [0, 2, 1, 3]
        : (tensor<2x16x8x32xf32>) -> tensor<2x8x16x32xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `permutation` $permutation attr-dict `:` functional-type(operands, results)
  }];
}

def Nn_CrossEntropyOp : Nn_DifferentiableOp<"cross_entropy"> {
  let summary = "mean softmax cross-entropy loss over all tokens";
  let description = [{
    `logits` is `[T..., vocab]` (rank >= 2), `labels` is `[T...]` with
    values in `[0, vocab)`. With `N` the number of tokens (the product of
    T): `result = (1 / N) * sum_t (logsumexp_v(logits[t, v]) -
    logits[t, labels[t]])`, computed in f32 whatever the logits' type; the
    result is the scalar `tensor<f32>`.

    Example:

    ```mlir
    %loss = nn.cross_entropy %logits, %labels
        : (tensor<2x16x1000xf32>, tensor<2x16xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$logits, Nn_IntTensor:$labels);
  let results = (outs Nn_ScalarF32Tensor:$result);
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

def Nn_EmbeddingGradOp : Nn_Op<"embedding_grad", [], ["getBytesMoved"]> {
  let summary = "scatter-adds result cotangents into a zero [vocab, hidden] table";
  let description = [{
    `result = zeros([vocab, hidden])`, then `result[ids[t...], h] +=
    result_grad[t..., h]` for every `t`. `result_grad` is
    `[T..., hidden]`, `ids` is `[T...]`; the result type gives `vocab`.

    Example:

    ```mlir
    %dtable = nn.embedding_grad %ids, %dh
        : (tensor<2x16xi32>, tensor<2x16x64xf32>) -> tensor<1000x64xf32>
    ```
  }];
  let arguments = (ins Nn_IntTensor:$ids, Nn_FloatTensor:$result_grad);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $result_grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Nn_ReduceSumOp : Nn_InferredOp<"reduce_sum"> {
  let summary = "sums over the listed dims, which are removed";
  let description = [{
    `result` is `input` summed over `dims` (strictly increasing, in
    `[0, rank)`); the summed dims are dropped from the shape. Used for bias
    gradients.

    Example:

    ```mlir
    %db = nn.reduce_sum %dy dims [0, 1] : (tensor<2x16x256xf32>) -> tensor<256xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Nn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dims` $dims attr-dict `:` functional-type(operands, results)
  }];
}

def Nn_RmsNormGradOp : Nn_InferredOp<"rms_norm_grad"> {
  let summary = "cotangents of nn.rms_norm's input and gamma";
  let description = [{
    With `r = 1 / sqrt(mean_h(x^2) + epsilon)`, `xhat = x * r` and
    `g = result_grad * gamma` (per row of `input` = x):
    `input_grad = r * (g - xhat * mean_h(g * xhat))` and
    `gamma_grad[h] = sum_t result_grad[t..., h] * xhat[t..., h]`.
    Operand shapes are those of nn.rms_norm plus `result_grad` like `input`.

    Example:

    ```mlir
    %dx, %dg = nn.rms_norm_grad %x, %g, %dy epsilon 1.0e-05
        : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x64xf32>)
        -> (tensor<2x16x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, Nn_FloatTensor:$gamma,
                       Nn_FloatTensor:$result_grad, F64Attr:$epsilon);
  let results = (outs Nn_FloatTensor:$input_grad, Nn_FloatTensor:$gamma_grad);
  let assemblyFormat = [{
    $input `,` $gamma `,` $result_grad `epsilon` $epsilon attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Nn_LayerNormGradOp : Nn_InferredOp<"layer_norm_grad"> {
  let summary = "cotangents of nn.layer_norm's input, gamma and beta";
  let description = [{
    With `r = 1 / sqrt(var + epsilon)`, `xhat = (x - mu) * r` and
    `g = result_grad * gamma` (per row, as in nn.layer_norm):
    `input_grad = r * (g - mean_h(g) - xhat * mean_h(g * xhat))`,
    `gamma_grad[h] = sum_t result_grad[t..., h] * xhat[t..., h]` and
    `beta_grad[h] = sum_t result_grad[t..., h]`.

    Example:

    ```mlir
    %dx, %dg, %db = nn.layer_norm_grad %x, %g, %dy epsilon 1.0e-05
        : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x64xf32>)
        -> (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, Nn_FloatTensor:$gamma,
                       Nn_FloatTensor:$result_grad, F64Attr:$epsilon);
  let results = (outs Nn_FloatTensor:$input_grad, Nn_FloatTensor:$gamma_grad,
                      Nn_FloatTensor:$beta_grad);
  let assemblyFormat = [{
    $input `,` $gamma `,` $result_grad `epsilon` $epsilon attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Nn_AttentionGradOp : Nn_InferredOp<"attention_grad"> {
  let summary = "cotangents of nn.attention's query, key and value";
  let description = [{
    Recomputes the probabilities `p` of nn.attention (as flash-attention's
    backward does) and, with `dO = result_grad`:
    `value_grad[b, j, h', d] = sum_{h in group h'} sum_{i >= j} p[b, h, i, j] * dO[b, i, h, d]`,
    `dp[b, h, i, j] = sum_d dO[b, i, h, d] * value[b, j, h', d]`,
    `ds = p * (dp - sum_j' p * dp)` (per row `i`),
    `query_grad[b, i, h, d] = scale * sum_{j <= i} ds[b, h, i, j] * key[b, j, h', d]` and
    `key_grad[b, j, h', d] = scale * sum_{h in group h'} sum_{i >= j} ds[b, h, i, j] * query[b, i, h, d]`.

    Example:

    ```mlir
    %dq, %dk, %dv = nn.attention_grad %q, %k, %v, %do
        : (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>,
           tensor<2x16x8x32xf32>)
        -> (tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x2x32xf32>)
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$query, Nn_FloatTensor:$key,
                       Nn_FloatTensor:$value, Nn_FloatTensor:$result_grad);
  let results = (outs Nn_FloatTensor:$query_grad, Nn_FloatTensor:$key_grad,
                      Nn_FloatTensor:$value_grad);
}

def Nn_SoftmaxGradOp : Nn_InferredOp<"softmax_grad"> {
  let summary = "cotangent of nn.softmax's input, from its result";
  let description = [{
    `input_grad[t..., j] = output[t..., j] * (result_grad[t..., j] -
    sum_j' result_grad[t..., j'] * output[t..., j'])`, where `output` is
    nn.softmax's result and `result_grad` its cotangent.

    Example:

    ```mlir
    %dx = nn.softmax_grad %p, %dp
        : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$output, Nn_FloatTensor:$result_grad);
  let results = (outs Nn_FloatTensor:$input_grad);
}

def Nn_SiluGradOp : Nn_InferredOp<"silu_grad"> {
  let summary = "cotangent of nn.silu's input";
  let description = [{
    With `s = sigmoid(input)`: `input_grad = result_grad * s * (1 + input *
    (1 - s))`, elementwise.

    Example:

    ```mlir
    %dx = nn.silu_grad %x, %dy
        : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, Nn_FloatTensor:$result_grad);
  let results = (outs Nn_FloatTensor:$input_grad);
}

def Nn_GeluGradOp : Nn_InferredOp<"gelu_grad"> {
  let summary = "cotangent of nn.gelu's input (tanh approximation)";
  let description = [{
    With `c = sqrt(2 / pi)`, `u = c * (x + 0.044715 * x^3)` and
    `t = tanh(u)`: `input_grad = result_grad * (0.5 * (1 + t) + 0.5 * x *
    (1 - t^2) * c * (1 + 3 * 0.044715 * x^2))`, elementwise, `x = input`.

    Example:

    ```mlir
    %dx = nn.gelu_grad %x, %dy
        : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$input, Nn_FloatTensor:$result_grad);
  let results = (outs Nn_FloatTensor:$input_grad);
}

def Nn_CrossEntropyGradOp : Nn_InferredOp<"cross_entropy_grad"> {
  let summary = "cotangent of nn.cross_entropy's logits";
  let description = [{
    `logits_grad[t..., v] = (softmax_v(logits[t..., :])[v] -
    (v == labels[t...] ? 1 : 0)) * loss_grad * scale`. The vector-Jacobian
    product of nn.cross_entropy sets `scale = 1 / N` with `N` the token
    count of the whole (unsharded) op, so the op stays exact when its tokens
    are split across devices.

    Example:

    ```mlir
    %dlogits = nn.cross_entropy_grad %logits, %labels, %dloss scale 3.125e-02
        : (tensor<2x16x1000xf32>, tensor<2x16xi32>, tensor<f32>)
        -> tensor<2x16x1000xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$logits, Nn_IntTensor:$labels,
                       Nn_ScalarF32Tensor:$loss_grad, F64Attr:$scale);
  let results = (outs Nn_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $labels `,` $loss_grad `scale` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Vocab-parallel cross-entropy
//===----------------------------------------------------------------------===//

// nn.cross_entropy and its backward op, split at the two all-reduces of
// Megatron's vocab-parallel cross-entropy. plan-placement emits them after
// autodiff when the logits are vocab-sharded; their local (per-shard)
// meaning is spelled out in docs/planner_nn.md, "Vocab-parallel
// cross-entropy".

def Nn_VocabMaxOp : Nn_InferredOp<"vocab_max"> {
  let summary = "per-token maximum logit over the real vocab rows";
  let description = [{
    `result[t...] = max_{v < vocab} logits[t..., v]`, in f32. `logits` is
    `[T..., V]` (rank >= 2) with `V <= vocab`: `V = vocab` in a global
    graph, the shard `ceil(vocab / g)` of a vocab-sharded one, whose rows
    past `vocab` (the padding) are not read. A shard without real rows
    gives `-inf`. Sharded over the vocab, the result is `partial<max>`.

    Example:

    ```mlir
    %m = nn.vocab_max %logits vocab 1000
        : (tensor<2x16x1000xf32>) -> tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$logits, I64Attr:$vocab);
  let results = (outs Nn_TensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `vocab` $vocab attr-dict `:` functional-type(operands, results)
  }];
}

def Nn_VocabStatsOp : Nn_InferredOp<"vocab_stats"> {
  let summary = "per-token sum of shifted exponentials and shifted label logit";
  let description = [{
    With `max` the result of nn.vocab_max (all-reduced):
    `result[t..., 0] = sum_{v < vocab} exp(logits[t..., v] - max[t...])` and
    `result[t..., 1] = logits[t..., labels[t...]] - max[t...]`, in f32.
    `logits` is `[T..., V]` as for nn.vocab_max, `labels` and `max` are
    `[T...]`, labels in `[0, vocab)`. Sharded over the vocab, a shard sums
    its real rows and contributes the label's logit only when it holds the
    label's row (else 0): the result is `partial<sum>`, one all-reduce for
    both statistics.

    Example:

    ```mlir
    %s = nn.vocab_stats %logits, %labels, %m vocab 1000
        : (tensor<2x16x1000xf32>, tensor<2x16xi32>, tensor<2x16xf32>)
        -> tensor<2x16x2xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$logits, Nn_IntTensor:$labels,
                       Nn_TensorOf<[F32]>:$max, I64Attr:$vocab);
  let results = (outs Nn_TensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $max `vocab` $vocab attr-dict `:` functional-type(operands, results)
  }];
}

def Nn_VocabCrossEntropyOp : Nn_InferredOp<"vocab_cross_entropy"> {
  let summary = "mean cross-entropy loss from the per-token vocab statistics";
  let description = [{
    `result = (1 / N) * sum_t (log(stats[t..., 0]) - stats[t..., 1])` with
    `N` the token count (the product of T) and `stats` `[T..., 2]` from
    nn.vocab_stats (all-reduced): `logsumexp - label logit`, the value of
    nn.cross_entropy on the logits. The result is the scalar `tensor<f32>`.

    Example:

    ```mlir
    %loss = nn.vocab_cross_entropy %s : (tensor<2x16x2xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Nn_TensorOf<[F32]>:$stats);
  let results = (outs Nn_ScalarF32Tensor:$result);
}

def Nn_VocabCrossEntropyGradOp : Nn_InferredOp<"vocab_cross_entropy_grad"> {
  let summary = "cotangent of the logits of the vocab-parallel cross-entropy";
  let description = [{
    `logits_grad[t..., v] = (exp(logits[t..., v] - max[t...]) / stats[t..., 0]
    - (v == labels[t...] ? 1 : 0)) * loss_grad * scale` for `v < vocab`,
    with `max` and `stats` the all-reduced statistics of nn.vocab_max and
    nn.vocab_stats: nn.cross_entropy_grad without an exchange. Rows past
    `vocab` (a padded shard) are 0. The result has the logits' type.

    Example:

    ```mlir
    %d = nn.vocab_cross_entropy_grad %logits, %labels, %m, %s, %dloss
        scale 3.125e-02 vocab 1000
        : (tensor<2x16x1000xf32>, tensor<2x16xi32>, tensor<2x16xf32>,
           tensor<2x16x2xf32>, tensor<f32>) -> tensor<2x16x1000xf32>
    ```
  }];
  let arguments = (ins Nn_FloatTensor:$logits, Nn_IntTensor:$labels,
                       Nn_TensorOf<[F32]>:$max, Nn_TensorOf<[F32]>:$stats,
                       Nn_ScalarF32Tensor:$loss_grad, F64Attr:$scale,
                       I64Attr:$vocab);
  let results = (outs Nn_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $labels `,` $max `,` $stats `,` $loss_grad `scale` $scale
    `vocab` $vocab attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif  // LOOM_PLANNER_DIALECT_NN_IR_NN_OPS_TD_
