// AdamW on a rank's local parameter shard, and the pieces of gradient
// clipping by global norm. The norm is global across shards, so clipping is
// split with the executor doing the collective in the middle:
//   local = localSquaredNorm(shard grads)       (every rank, every shard)
//   total = all-reduce sum of local             (executor, over the group)
//   scaleGradients(grads, clipCoefficient(total, max_norm))
// and only then adamwStep. This matches torch.nn.utils.clip_grad_norm_ on
// the unsharded parameters.
#ifndef LOOM_RUNTIME_OPTIM_ADAMW_H_
#define LOOM_RUNTIME_OPTIM_ADAMW_H_

#include <cstdint>

namespace loom::runtime::optim {

// torch.optim.AdamW's hyper-parameters and defaults.
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// One AdamW step on `count` elements, as torch.optim.AdamW (single-tensor
// path): decoupled decay p *= 1 - lr wd, then m = b1 m + (1 - b1) g,
// v = b2 v + (1 - b2) g^2, p -= lr / (1 - b1^t) * m / (sqrt(v) /
// sqrt(1 - b2^t) + eps). `step` is 1 for the first step; exp_avg and
// exp_avg_sq start at zero. Elementwise, so a shard's update is exactly its
// slice of the unsharded update. The four arrays must not overlap.
void adamwStep(const AdamWConfig& config, int64_t step, float* params, const float* grads,
               float* exp_avg, float* exp_avg_sq, int64_t count);

// The sum of squares of a shard's gradients, accumulated in double so the
// total does not depend on how the elements were split across shards beyond
// double rounding.
double localSquaredNorm(const float* grads, int64_t count);

// torch's clip factor min(1, max_norm / (sqrt(total_squared_norm) + 1e-6))
// from the all-reduced sum of every shard's localSquaredNorm.
float clipCoefficient(double total_squared_norm, double max_norm);

// grads *= coefficient.
void scaleGradients(float* grads, int64_t count, float coefficient);

}  // namespace loom::runtime::optim

#endif  // LOOM_RUNTIME_OPTIM_ADAMW_H_
