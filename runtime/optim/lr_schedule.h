// Learning-rate schedules: linear warmup, then constant, linear or cosine
// decay to a floor (the shapes torchtitan and Megatron-LM train with). The
// factor is a function of the optimizer step alone, so a run resumed from
// a checkpoint, which restores the step, continues the schedule exactly.
#ifndef LOOM_RUNTIME_OPTIM_LR_SCHEDULE_H_
#define LOOM_RUNTIME_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace loom::runtime::optim {

enum class LrDecay { kConstant, kLinear, kCosine };

struct LrSchedule {
  // Steps 1..warmup_steps ramp linearly to the full rate: step s gets
  // s / (warmup_steps + 1) of it (never 0, as torchtitan's warmup).
  int64_t warmup_steps = 0;
  LrDecay decay = LrDecay::kConstant;
  // The last step of the decay (counted from step 1, warmup included);
  // after it the rate stays at the floor. Unused for kConstant.
  int64_t decay_end_step = 0;
  // The floor, as a fraction of the full rate.
  double min_ratio = 0;

  // The multiplier of the base learning rate at optimizer step `step`
  // (from 1).
  double factor(int64_t step) const;
};

// "constant", "linear", "cosine".
absl::StatusOr<LrDecay> parseLrDecay(const std::string& text);
const char* lrDecayName(LrDecay decay);

// Checks a schedule: non-negative warmup, a decay that ends after the
// warmup, a floor in [0, 1]; the error names the flag to change.
absl::Status checkLrSchedule(const LrSchedule& schedule);

}  // namespace loom::runtime::optim

#endif  // LOOM_RUNTIME_OPTIM_LR_SCHEDULE_H_
