// Writes the two-stage plan of gradient_swap.h for end-to-end tests of
// point-to-point under //tools:train:
//   write_gradient_swap_plan BASE_PLAN.json PARAM OUT.json
#include <cstdio>

#include "absl/status/status.h"
#include "plan/plan.h"
#include "plan/testing/gradient_swap.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: write_gradient_swap_plan BASE_PLAN.json PARAM OUT.json\n");
    return 2;
  }
  absl::StatusOr<loom::plan::Plan> base = loom::plan::loadPlan(argv[1]);
  absl::StatusOr<loom::plan::Plan> swap =
      base.ok() ? loom::plan::testing::gradientSwapPlan(*base, argv[2]) : base.status();
  absl::Status s = swap.ok() ? loom::plan::checkPlan(*swap) : swap.status();
  if (s.ok()) s = loom::plan::writePlanFile(*swap, argv[3]);
  if (!s.ok()) {
    std::fprintf(stderr, "write_gradient_swap_plan: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
