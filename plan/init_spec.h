// How a parameter or optimizer state starts (plan.json's buffers[].init):
// the runtime fills it from a counter-based RNG indexed by the global
// element (runtime/init/counter_rng.h), so every sharding of a model starts
// from the same values.
#ifndef LOOM_PLAN_INIT_SPEC_H_
#define LOOM_PLAN_INIT_SPEC_H_

#include <cstdint>

namespace loom::plan {

struct InitSpec {
  enum class Kind { kNormal, kZeros, kOnes };
  Kind kind = Kind::kNormal;
  float mean = 0.0f;  // kNormal only
  float std = 1.0f;   // kNormal only
  uint64_t seed = 0;
  // Distinguishes the parameters of one model (the plan assigns one per
  // parameter), so equal-shaped parameters get different values.
  uint64_t stream_id = 0;
  bool operator==(const InitSpec&) const = default;
};

}  // namespace loom::plan

#endif  // LOOM_PLAN_INIT_SPEC_H_
