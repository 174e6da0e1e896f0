// Timing of collectives over a message-size sweep (collective_sweep.h).
#include "tools/calibrate/collective_sweep.h"

#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/reduce_op.h"
#include "comm/tensor.h"
#include "comm/work.h"
#include "tools/calibrate/measure_util.h"

namespace loom::calibrate {
namespace {

using comm::DType;
using comm::ProcessGroup;
using comm::Tensor;
using Clock = std::chrono::steady_clock;

absl::Status waitFor(ProcessGroup::WorkOr work) {
  if (!work.ok()) return work.status();
  return (*work)->wait();
}

// The buffers of one collective at one size, and the call. `run` holds
// tensors that point into the vectors; moving a Call moves the vectors'
// storage with it, so they stay valid.
struct Call {
  std::vector<float> input;
  std::vector<float> output;
  int64_t bytes = 0;  // S actually moved after rounding
  std::function<ProcessGroup::WorkOr()> run;
};

// An empty `run` when S is too small for one f32 per rank.
Call makeCall(ProcessGroup& group, CollectiveKind kind, int64_t size_bytes) {
  Call call;
  const int g = group.size();
  const int64_t elements = size_bytes / static_cast<int64_t>(sizeof(float));
  const int64_t chunk = elements / g;
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast: {
      if (elements == 0) return call;
      call.output.assign(elements, 1.0f);
      call.bytes = elements * static_cast<int64_t>(sizeof(float));
      Tensor t = Tensor::of(call.output);
      if (kind == CollectiveKind::kAllReduce) {
        call.run = [&group, t] { return group.allReduce(t); };
      } else {
        call.run = [&group, t] { return group.broadcast(t, {.root = 0}); };
      }
      return call;
    }
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter: {
      if (chunk == 0) return call;
      const bool gather = kind == CollectiveKind::kAllGather;
      call.input.assign(gather ? chunk : chunk * g, 1.0f);
      call.output.assign(gather ? chunk * g : chunk, 0.0f);
      call.bytes = chunk * g * static_cast<int64_t>(sizeof(float));
      Tensor in = Tensor::of(call.input);
      Tensor out = Tensor::of(call.output);
      if (gather) {
        call.run = [&group, in, out] { return group.allGatherIntoTensor(out, in); };
      } else {
        call.run = [&group, in, out] { return group.reduceScatterTensor(out, in); };
      }
      return call;
    }
  }
  return call;
}

absl::StatusOr<double> maxAcrossRanks(ProcessGroup& group, double value) {
  std::vector<double> cell{value};
  if (absl::Status s = waitFor(group.allReduce(Tensor::of(cell), {.op = comm::ReduceOp::kMax}));
      !s.ok()) {
    return s;
  }
  return cell[0];
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> sweepSizes(int64_t min_bytes, int64_t max_bytes, int factor) {
  if (min_bytes <= 0 || max_bytes < min_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_bytes (", min_bytes, ") must be > 0 and <= --max_bytes (", max_bytes, ")"));
  }
  if (factor < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--factor ", factor, " must be >= 2 (sizes grow geometrically)"));
  }
  std::vector<int64_t> sizes;
  for (int64_t s = min_bytes; s <= max_bytes; s *= factor) sizes.push_back(s);
  return sizes;
}

absl::StatusOr<std::vector<MeasuredSeries>> runCollectiveSweep(
    ProcessGroup& group, const CollectiveSweepOptions& options,
    const std::function<void(const std::string&)>& progress) {
  if (options.iters < 1 || options.warmup < 0 || options.repeats < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--iters (", options.iters, ") and --repeats (",
                                                   options.repeats, ") must be >= 1 and --warmup (",
                                                   options.warmup, ") >= 0"));
  }
  std::vector<MeasuredSeries> all;
  for (CollectiveKind kind : options.kinds) {
    MeasuredSeries series{.kind = kind, .group_size = group.size(), .points = {}};
    for (int64_t size : options.sizes) {
      Call call = makeCall(group, kind, size);
      if (!call.run) continue;
      for (int i = 0; i < options.warmup; ++i) {
        if (absl::Status s = waitFor(call.run()); !s.ok()) return s;
      }
      std::vector<double> samples;
      for (int r = 0; r < options.repeats; ++r) {
        if (absl::Status s = waitFor(group.barrier()); !s.ok()) return s;
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < options.iters; ++i) {
          if (absl::Status s = waitFor(call.run()); !s.ok()) return s;
        }
        const double local =
            std::chrono::duration<double>(Clock::now() - start).count() / options.iters;
        absl::StatusOr<double> slowest = maxAcrossRanks(group, local);
        if (!slowest.ok()) return slowest.status();
        samples.push_back(*slowest);
      }
      series.points.push_back({.bytes = call.bytes, .time_s = median(std::move(samples))});
      if (progress && group.rank() == 0) {
        progress(absl::StrFormat("  %-14s %d ranks %11d B  %10.1f us",
                                 std::string(collectiveKindName(kind)), group.size(), call.bytes,
                                 series.points.back().time_s * 1e6));
      }
    }
    all.push_back(std::move(series));
  }
  return all;
}

nlohmann::json seriesToJson(const std::vector<MeasuredSeries>& series) {
  nlohmann::json list = nlohmann::json::array();
  for (const MeasuredSeries& s : series) {
    nlohmann::json points = nlohmann::json::array();
    for (const TimedPoint& p : s.points) {
      points.push_back({{"bytes", p.bytes}, {"time_s", p.time_s}});
    }
    list.push_back({{"kind", std::string(collectiveKindName(s.kind))},
                    {"group_size", s.group_size},
                    {"points", points}});
  }
  return {{"series", list}};
}

absl::StatusOr<std::vector<MeasuredSeries>> seriesFromJson(const nlohmann::json& json) {
  std::vector<MeasuredSeries> out;
  try {
    for (const nlohmann::json& s : json.at("series")) {
      absl::StatusOr<CollectiveKind> kind = collectiveKindFromName(s.at("kind").get<std::string>());
      if (!kind.ok()) return kind.status();
      MeasuredSeries series{
          .kind = *kind, .group_size = s.at("group_size").get<int>(), .points = {}};
      for (const nlohmann::json& p : s.at("points")) {
        series.points.push_back(
            {.bytes = p.at("bytes").get<int64_t>(), .time_s = p.at("time_s").get<double>()});
      }
      out.push_back(std::move(series));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(
        absl::StrCat("collective results from the ranks are malformed: ", e.what()));
  }
  return out;
}

}  // namespace loom::calibrate
