// Tests of Join on gloo with ranks as threads: ranks with different numbers
// of steps finish together, the joined ranks shadowing the others'
// all-reduces, the last joiners told so; throw_on_early_termination stops
// every rank at once; misuse is reported.
#include "comm/join.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/process_group.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::comm::testing::runRanks;
using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

// A minimal data-parallel trainer: each step all-reduces [gradient, 1], so
// the second entry counts the ranks that contributed. A joined rank
// contributes [0, 0].
class ToyTrainer : public Joinable {
 public:
  explicit ToyTrainer(ProcessGroup& group) : group_(group) {}

  absl::Status step(int64_t gradient) {
    std::vector<int64_t> buffer = {gradient, 1};
    if (absl::Status s = group_.allReduceSync(Tensor::of(buffer)); !s.ok()) return s;
    sums.push_back(buffer[0]);
    contributors.push_back(buffer[1]);
    return absl::OkStatus();
  }

  std::unique_ptr<JoinHook> joinHook() override { return std::make_unique<Hook>(*this); }
  ProcessGroup& joinProcessGroup() override { return group_; }

  std::vector<int64_t> sums;
  std::vector<int64_t> contributors;
  int shadowed = 0;
  std::optional<bool> last_joiner;

 private:
  class Hook : public JoinHook {
   public:
    explicit Hook(ToyTrainer& trainer) : trainer_(trainer) {}
    absl::Status mainHook() override {
      std::vector<int64_t> zeros = {0, 0};
      ++trainer_.shadowed;
      return trainer_.group_.allReduceSync(Tensor::of(zeros));
    }
    absl::Status postHook(bool is_last_joiner) override {
      trainer_.last_joiner = is_last_joiner;
      return absl::OkStatus();
    }

   private:
    ToyTrainer& trainer_;
  };

  ProcessGroup& group_;
};

ProcessGroupOptions quickOptions() {
  ProcessGroupOptions options;
  options.timeout = absl::Seconds(20);
  return options;
}

void runUneven(const std::vector<int>& steps) {
  const int most = *std::max_element(steps.begin(), steps.end());
  runRanks(
      static_cast<int>(steps.size()),
      [&](ProcessGroup& group) {
        const int r = group.rank();
        ToyTrainer trainer(group);
        Join join({&trainer});
        EXPECT_EQ(join.activeRanks(), static_cast<int64_t>(steps.size()));
        for (int s = 0; s < steps[r]; ++s) {
          ASSERT_TRUE(join.notify().ok());
          const auto still =
              std::count_if(steps.begin(), steps.end(), [&](int n) { return n > s; });
          EXPECT_EQ(join.activeRanks(), still) << "rank " << r << " step " << s;
          ASSERT_TRUE(trainer.step(10 * (r + 1)).ok());
        }
        ASSERT_TRUE(join.join().ok());
        // Step s summed the ranks that still had a step s.
        for (int s = 0; s < steps[r]; ++s) {
          int64_t sum = 0;
          int64_t count = 0;
          for (size_t q = 0; q < steps.size(); ++q) {
            if (steps[q] > s) {
              sum += 10 * static_cast<int64_t>(q + 1);
              ++count;
            }
          }
          EXPECT_EQ(trainer.sums[s], sum) << "rank " << r << " step " << s;
          EXPECT_EQ(trainer.contributors[s], count) << "rank " << r << " step " << s;
        }
        EXPECT_EQ(trainer.shadowed, most - steps[r]);
        ASSERT_TRUE(trainer.last_joiner.has_value());
        EXPECT_EQ(*trainer.last_joiner, steps[r] == most);
        // The group is in step afterwards.
        EXPECT_TRUE(group.barrierSync().ok());
      },
      quickOptions());
}

TEST(JoinTest, ThreeRanksWithDifferentStepCounts) { runUneven({2, 4, 3}); }

TEST(JoinTest, FourRanksWithDifferentStepCounts) { runUneven({1, 5, 5, 2}); }

TEST(JoinTest, EvenInputsShadowNothing) { runUneven({3, 3}); }

TEST(JoinTest, ThrowOnEarlyTerminationStopsEveryRank) {
  runRanks(
      3,
      [&](ProcessGroup& group) {
        ToyTrainer trainer(group);
        Join join({&trainer}, {.enable = true, .throw_on_early_termination = true});
        const int steps = group.rank() == 0 ? 1 : 3;
        absl::Status status;
        for (int s = 0; s < steps && status.ok(); ++s) {
          status = join.notify();
          if (status.ok()) status = trainer.step(1);
        }
        if (status.ok()) status = join.join();
        EXPECT_THAT(status, StatusIs(absl::StatusCode::kAborted,
                                     HasSubstr(group.rank() == 0 ? "this rank ran out of inputs"
                                                                 : "a rank ran out of inputs")));
        // Ranks 1 and 2 made one full step before they were stopped.
        EXPECT_EQ(trainer.sums.size(), 1u);
        EXPECT_EQ(trainer.shadowed, 0);
      },
      quickOptions());
}

TEST(JoinTest, MisuseIsReported) {
  runRanks(
      1,
      [&](ProcessGroup& group) {
        Join none({});
        EXPECT_THAT(none.notify(),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least one")));
        ToyTrainer trainer(group);
        Join join({&trainer});
        ASSERT_TRUE(join.join().ok());
        EXPECT_THAT(join.notify(),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("after join()")));
        EXPECT_THAT(join.join(),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("called twice")));
        Join disabled({&trainer}, {.enable = false, .throw_on_early_termination = false});
        EXPECT_TRUE(disabled.notify().ok());
        EXPECT_TRUE(disabled.join().ok());
      },
      quickOptions());
}

}  // namespace
}  // namespace loom::comm
