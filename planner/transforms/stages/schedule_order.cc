#include "planner/transforms/stages/schedule_order.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace loom::planner::stages {
namespace {

using Kind = PipelineAction::Kind;

std::string shapeText(const PipelineShape& s) {
  return absl::StrCat(s.stages, " stages x ", s.virtual_stages, " chunks, ", s.micro_batches,
                      " micro-batches");
}

std::string actionText(const PipelineAction& a) {
  return absl::StrCat(a.kind == Kind::kForward ? "forward" : "backward", " of micro-batch ",
                      a.micro_batch, " through chunk ", a.chunk);
}

absl::Status checkShape(PipelineSchedule schedule, const PipelineShape& s) {
  if (s.stages < 1 || s.virtual_stages < 1 || s.micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a pipeline of ", shapeText(s), ": each must be >= 1"));
  }
  if (schedule != PipelineSchedule::kInterleaved1F1B && s.virtual_stages != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheduleName(schedule), " runs one chunk per stage, got ", shapeText(s),
        "; use interleaved-1f1b for virtual stages"));
  }
  if (schedule == PipelineSchedule::kInterleaved1F1B) {
    if (s.virtual_stages < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "interleaved-1f1b needs >= 2 chunks per stage, got ", shapeText(s), "; use 1f1b"));
    }
    if (s.micro_batches % s.stages != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "interleaved-1f1b takes micro-batches in groups of the stage count, got ",
          shapeText(s), "; use a multiple of ", s.stages, " micro-batches"));
    }
  }
  return absl::OkStatus();
}

// One stage of 1F1B over `count` actions: `warmup` forwards, then a
// forward and a backward in turn, then the backwards left. `forward(k)`
// and `backward(k)` give the k-th of each.
template <typename Forward, typename Backward>
std::vector<PipelineAction> oneForwardOneBackward(int64_t count, int64_t warmup, Forward forward,
                                                  Backward backward) {
  std::vector<PipelineAction> out;
  warmup = std::min(warmup, count);
  for (int64_t k = 0; k < warmup; ++k) out.push_back(forward(k));
  for (int64_t k = 0; k < count - warmup; ++k) {
    out.push_back(forward(warmup + k));
    out.push_back(backward(k));
  }
  for (int64_t k = count - warmup; k < count; ++k) out.push_back(backward(k));
  return out;
}

}  // namespace

const char* scheduleName(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return "gpipe";
    case PipelineSchedule::k1F1B:
      return "1f1b";
    case PipelineSchedule::kInterleaved1F1B:
      return "interleaved-1f1b";
  }
  return "?";
}

absl::StatusOr<PipelineSchedule> parseSchedule(std::string_view name) {
  for (PipelineSchedule s : {PipelineSchedule::kGpipe, PipelineSchedule::k1F1B,
                             PipelineSchedule::kInterleaved1F1B}) {
    if (name == scheduleName(s)) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown pipeline schedule '", std::string(name),
                                                 "'; expected gpipe, 1f1b or interleaved-1f1b"));
}

absl::StatusOr<std::vector<std::vector<PipelineAction>>> scheduleOrder(PipelineSchedule schedule,
                                                                       const PipelineShape& shape) {
  if (absl::Status s = checkShape(schedule, shape); !s.ok()) return s;
  const int64_t p = shape.stages, v = shape.virtual_stages, m = shape.micro_batches;
  std::vector<std::vector<PipelineAction>> order(p);
  for (int64_t s = 0; s < p; ++s) {
    if (schedule == PipelineSchedule::kGpipe) {
      for (int64_t mb = 0; mb < m; ++mb) order[s].push_back({Kind::kForward, mb, s});
      for (int64_t mb = 0; mb < m; ++mb) order[s].push_back({Kind::kBackward, mb, s});
      continue;
    }
    if (schedule == PipelineSchedule::k1F1B) {
      // Stage s runs p - s - 1 forwards before its first backward can come.
      order[s] = oneForwardOneBackward(
          m, p - s - 1, [&](int64_t k) { return PipelineAction{Kind::kForward, k, s}; },
          [&](int64_t k) { return PipelineAction{Kind::kBackward, k, s}; });
      continue;
    }
    // Interleaved: the k-th action of a stage takes micro-batch group
    // k / (p v), chunk (k / p) mod v of it (backwards from the last chunk),
    // and micro-batch k mod p of the group; the warm-up is Megatron-LM's.
    auto microOf = [&](int64_t k) { return (k / (p * v)) * p + k % p; };
    auto localChunk = [&](int64_t k) { return (k % (p * v)) / p; };
    const int64_t total = m * v;
    const int64_t warmup = m == p ? total : (p - s - 1) * 2 + (v - 1) * p;
    order[s] = oneForwardOneBackward(
        total, warmup,
        [&](int64_t k) { return PipelineAction{Kind::kForward, microOf(k), localChunk(k) * p + s}; },
        [&](int64_t k) {
          return PipelineAction{Kind::kBackward, microOf(k), (v - 1 - localChunk(k)) * p + s};
        });
  }
  return order;
}

absl::StatusOr<PipelineTiming> simulateOrder(const std::vector<std::vector<PipelineAction>>& order,
                                             const PipelineShape& shape,
                                             const std::vector<double>& forward_s,
                                             const std::vector<double>& backward_s,
                                             double transfer_s) {
  const int64_t p = shape.stages, m = shape.micro_batches;
  const int64_t chunks = p * shape.virtual_stages;
  if (static_cast<int64_t>(order.size()) != p ||
      static_cast<int64_t>(forward_s.size()) != chunks ||
      static_cast<int64_t>(backward_s.size()) != chunks || m < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulating ", shapeText(shape), " needs an order per stage and a forward and backward "
        "time per chunk; got ", order.size(), " orders, ", forward_s.size(), " and ",
        backward_s.size(), " times"));
  }
  // done[kind][chunk][micro-batch]: when it ends (-1: not run yet).
  std::vector<std::vector<std::vector<double>>> done(
      2, std::vector<std::vector<double>>(chunks, std::vector<double>(m, -1)));
  std::vector<std::vector<bool>> listed(2 * chunks, std::vector<bool>(m, false));
  for (int64_t s = 0; s < p; ++s) {
    for (const PipelineAction& a : order[s]) {
      const int64_t k = a.kind == Kind::kForward ? 0 : 1;
      if (a.chunk < 0 || a.chunk >= chunks || a.chunk % p != s || a.micro_batch < 0 ||
          a.micro_batch >= m || listed[k * chunks + a.chunk][a.micro_batch]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s, " lists the ", actionText(a), ", which is out of range, on another "
            "stage, or listed twice, for ", shapeText(shape)));
      }
      listed[k * chunks + a.chunk][a.micro_batch] = true;
    }
  }
  for (const auto& row : listed) {
    if (std::find(row.begin(), row.end(), false) != row.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the order leaves out some forward or backward of ", shapeText(shape)));
    }
  }
  PipelineTiming t;
  t.busy_s.assign(p, 0);
  t.peak_in_flight.assign(p, 0);
  std::vector<double> free(p, 0);
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> inFlight(p, 0);
  // When `a`'s input is there, or -1 while what makes it has not run.
  auto readyAt = [&](const PipelineAction& a, int64_t stage) -> double {
    const bool forward = a.kind == Kind::kForward;
    const int64_t from = forward ? a.chunk - 1 : a.chunk + 1;
    if (!forward && done[0][a.chunk][a.micro_batch] < 0) return -1;
    if (forward && from < 0) return 0;
    if (!forward && from >= chunks) return done[0][a.chunk][a.micro_batch];
    const double input = done[forward ? 0 : 1][from][a.micro_batch];
    if (input < 0) return -1;
    return input + (from % p != stage ? transfer_s : 0);
  };
  size_t remaining = 2 * static_cast<size_t>(chunks * m);
  while (remaining > 0) {
    bool moved = false;
    for (int64_t s = 0; s < p; ++s) {
      while (next[s] < order[s].size()) {
        const PipelineAction& a = order[s][next[s]];
        const double ready = readyAt(a, s);
        if (ready < 0) break;
        const bool forward = a.kind == Kind::kForward;
        const double seconds = forward ? forward_s[a.chunk] : backward_s[a.chunk];
        const double end = std::max(free[s], ready) + seconds;
        done[forward ? 0 : 1][a.chunk][a.micro_batch] = end;
        free[s] = end;
        t.busy_s[s] += seconds;
        inFlight[s] += forward ? 1 : -1;
        t.peak_in_flight[s] = std::max(t.peak_in_flight[s], inFlight[s]);
        ++next[s];
        --remaining;
        moved = true;
      }
    }
    if (!moved) {
      for (int64_t s = 0; s < p; ++s) {
        if (next[s] < order[s].size()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "the order deadlocks: stage ", s, " waits for the input of its ",
              actionText(order[s][next[s]]), ", which no stage can make next"));
        }
      }
    }
  }
  t.step_s = *std::max_element(free.begin(), free.end());
  for (int64_t s = 0; s < p; ++s) t.bubble_s.push_back(t.step_s - t.busy_s[s]);
  return t;
}

}  // namespace loom::planner::stages
