// Learning-rate schedules (see lr_schedule.h).
#include "runtime/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace loom::runtime::optim {

double LrSchedule::factor(int64_t step) const {
  if (step <= warmup_steps) {
    return static_cast<double>(step) / static_cast<double>(warmup_steps + 1);
  }
  if (decay == LrDecay::kConstant) return 1.0;
  if (step >= decay_end_step) return min_ratio;
  const double progress =
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_end_step - warmup_steps);
  const double shape = decay == LrDecay::kLinear
                           ? 1.0 - progress
                           : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return min_ratio + (1.0 - min_ratio) * shape;
}

absl::StatusOr<LrDecay> parseLrDecay(const std::string& text) {
  if (text == "constant") return LrDecay::kConstant;
  if (text == "linear") return LrDecay::kLinear;
  if (text == "cosine") return LrDecay::kCosine;
  return absl::InvalidArgumentError(
      absl::StrCat("--lr_decay='", text, "' is not constant, linear or cosine"));
}

const char* lrDecayName(LrDecay decay) {
  switch (decay) {
    case LrDecay::kLinear:
      return "linear";
    case LrDecay::kCosine:
      return "cosine";
    default:
      return "constant";
  }
}

absl::Status checkLrSchedule(const LrSchedule& s) {
  if (s.warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr_warmup_steps=", s.warmup_steps, " must be >= 0"));
  }
  if (s.min_ratio < 0 || s.min_ratio > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lr_min_ratio=", s.min_ratio, " must be in [0, 1]"));
  }
  if (s.decay != LrDecay::kConstant && s.decay_end_step <= s.warmup_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", lrDecayName(s.decay), " decay ends at step ", s.decay_end_step, ", not after the ",
        s.warmup_steps,
        " warmup steps; raise --lr_decay_steps (default: --steps) or lower --lr_warmup_steps"));
  }
  return absl::OkStatus();
}

}  // namespace loom::runtime::optim
