// Runs five clipped AdamW steps on two parameter shards with fixed data and
// prints the parameters after each step, one line per step, for
// adamw_torch_test.py to compare with torch.optim.AdamW. The data formulas
// are duplicated in that script; both evaluate them in double with libm.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "runtime/optim/adamw.h"

namespace {

using ::loom::runtime::optim::AdamWConfig;

struct Shard {
  std::vector<float> params, grads, exp_avg, exp_avg_sq;
};

}  // namespace

int main() {
  const AdamWConfig config{0.05, 0.9, 0.95, 1e-8, 0.1};
  const double max_norm = 1.0;
  std::vector<Shard> shards;
  for (int64_t k : {0, 1}) {
    const int64_t count = k == 0 ? 7 : 5;
    Shard shard{std::vector<float>(count), std::vector<float>(count),
                std::vector<float>(count, 0.0f), std::vector<float>(count, 0.0f)};
    for (int64_t i = 0; i < count; ++i) {
      shard.params[i] = static_cast<float>(std::sin(0.1 * i + k));
    }
    shards.push_back(shard);
  }
  for (int64_t step = 1; step <= 5; ++step) {
    double total = 0.0;
    for (int64_t k = 0; k < 2; ++k) {
      Shard& shard = shards[k];
      for (size_t i = 0; i < shard.grads.size(); ++i) {
        shard.grads[i] = static_cast<float>(0.3 * step * std::cos(0.37 * i + 1.3 * step + k));
      }
      // Each shard's local part; a rank would all-reduce `total`.
      total += loom::runtime::optim::localSquaredNorm(shard.grads.data(), shard.grads.size());
    }
    const float coefficient = loom::runtime::optim::clipCoefficient(total, max_norm);
    std::printf("%lld %.9g", static_cast<long long>(step), coefficient);
    for (Shard& shard : shards) {
      const auto count = static_cast<int64_t>(shard.params.size());
      loom::runtime::optim::scaleGradients(shard.grads.data(), count, coefficient);
      loom::runtime::optim::adamwStep(config, step, shard.params.data(), shard.grads.data(),
                                      shard.exp_avg.data(), shard.exp_avg_sq.data(), count);
      for (float p : shard.params) std::printf(" %.9g", p);
    }
    std::printf("\n");
  }
  return 0;
}
