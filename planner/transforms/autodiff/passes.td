// Passes of the autodiff stage: forward model graph -> one training step
// (loss and the gradient of every parameter).
#ifndef LOOM_PLANNER_TRANSFORMS_AUTODIFF_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_AUTODIFF_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanAutodiff : Pass<"plan-autodiff", "::mlir::func::FuncOp"> {
  let summary = "appends the backward graph: returns the loss and one "
                "gradient per nn.param argument";
  let description = [{
    Input: a `func.func` of nn ops that returns one scalar loss
    (`tensor<f32>`, usually the result of `nn.cross_entropy`) and has at
    least one `{nn.param}` argument. Output: the same function, rewritten
    in place into one training step. It gains a last argument, the loss
    cotangent `tensor<f32>` (1.0 for plain training; a loss scale or
    1/microbatches also work), named by the function attribute
    `nn.loss_grad_arg = <index>`. After the forward ops come, in reverse
    order, the backward ops each forward op's `VjpOpInterface` builds;
    a value used several times gets the `nn.add` of its cotangents (tied
    weights thus get the sum). It returns the loss, then the gradient of
    every parameter in argument order; gradient results carry
    `nn.grad_of = <argument index>` and the parameter's `nn.name`.

    ```mlir
    func.func @f(%x: tensor<4x8xf32>, %labels: tensor<4xi32>,
                 %w: tensor<8x16xf32> {nn.param, nn.name = "w"}) -> tensor<f32> {
      %logits = nn.linear %x, %w : ...
      %loss = nn.cross_entropy %logits, %labels : ...
      return %loss : tensor<f32>
    }
    // becomes
    func.func @f(%x: ..., %labels: ..., %w: ... {nn.param, nn.name = "w"},
                 %dloss: tensor<f32>)
        -> (tensor<f32>, tensor<8x16xf32> {nn.grad_of = 2 : i64, nn.name = "w"})
        attributes {nn.loss_grad_arg = 3 : i64} {
      %logits = nn.linear %x, %w : ...
      %loss = nn.cross_entropy %logits, %labels : ...
      %dlogits = nn.cross_entropy_grad %logits, %labels, %dloss scale 2.5e-01 : ...
      %dw = nn.matmul %x, %dlogits transpose_lhs : ...
      return %loss, %dw : tensor<f32>, tensor<8x16xf32>
    }
    ```

    Backward ops carry the location of their forward op. Cotangents of
    values no parameter influences (inputs, their projections) are not
    built. The pass refuses, with a diagnostic, a function that does not
    return exactly one `tensor<f32>`, has no parameter or several blocks, an
    op on the path from a parameter to the loss without a VJP, and a
    parameter the loss does not depend on (its gradient would be zero, and
    nn has no op to build zeros). See docs/planner_autodiff.md.
  }];
  let dependentDialects = ["::loom::planner::nn::NnDialect"];
}

#endif  // LOOM_PLANNER_TRANSFORMS_AUTODIFF_PASSES_TD_
