// The mesh search behind `plan --mesh=auto`: every factorisation of the
// device count into pp x dp x fsdp x tp (pp outermost, tp innermost and
// inside a host), every pipeline schedule and chunks per stage, and every
// combination of prefetch depth, reshard-after-forward, bucket size,
// micro-batch under the global batch and what is kept or deferred between
// its micro-steps; recompute and optimizer offload where the plan does not
// fit without them. Candidates are priced by a StepPricer (the plan tool's
// prices the pipeline's own programs, tools/plan/template_pricer.h) and
// ranked by step time among the plans that fit in device and host memory.
// Pruning keeps the top of the ranking exact: a group of candidates that
// share a mesh and micro-batch is dropped when its memory lower bound is
// over the cap or its step-time lower bound cannot enter the top rows.
#ifndef LOOM_PLANNER_COST_SEARCH_H_
#define LOOM_PLANNER_COST_SEARCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "planner/cost/cost_model.h"
#include "planner/cost/strategy.h"

namespace loom::planner::cost {

// Choices fixed by the user (--pin key=value); unset ones are searched.
struct Pins {
  std::optional<int64_t> pp;
  std::optional<int64_t> virtual_stages;
  std::optional<stages::PipelineSchedule> schedule;
  std::optional<int64_t> dp;
  std::optional<int64_t> fsdp;
  std::optional<int64_t> tp;
  std::optional<int64_t> prefetch;
  std::optional<bool> reshard_after_forward;
  std::optional<int64_t> bucket_mb;
  std::optional<int64_t> micro_batch;
  std::optional<Recompute> recompute;
  std::optional<bool> sequence_parallel;
  std::optional<bool> keep_gathered;
  std::optional<bool> defer_grad_sync;
  std::optional<bool> offload_optimizer;
};

// Parses one "key=value" pin into `pins` (keys: pp, virtual-stages,
// schedule, dp, fsdp, tp, prefetch, reshard, bucket-mb, micro-batch,
// recompute, sequence-parallel, keep-gathered, defer-grad-sync, offload);
// the error names the key and the accepted values.
absl::Status parsePin(const std::string& text, Pins& pins);

struct SearchOptions {
  // Sequences per optimizer step over all devices.
  int64_t global_batch = 0;
  // The graph fixes the batch (a .mlir file): one micro-step per step, its
  // micro-batch the global batch over the data-parallel ranks.
  bool fixed_batch = false;
  Pins pins = {};
  // The largest tp degree (0: the devices of a host).
  int64_t max_tp = 0;
  // Allow tp groups that span hosts (off: tp divides the devices per host).
  bool allow_tp_across_hosts = false;
  // Per-device memory cap in bytes (0: the cost model's device memory).
  int64_t memory_cap_bytes = 0;
  // Host memory per device for offloaded buffers, in bytes (0: the
  // device's share of its host, mesh::DeviceSpec::host_memory_bytes).
  int64_t host_memory_cap_bytes = 0;
  std::vector<int64_t> prefetch_choices = {0, 1, 2};
  std::vector<int64_t> bucket_mb_choices = {0, 64};
  // Rows of the ranking kept exact by the pruning.
  int64_t top = 10;
  // No pruning: every candidate is evaluated (tests compare the two).
  bool exhaustive = false;
  // Called after every `progress_every` evaluations and at the end with
  // (evaluated, enumerated).
  std::function<void(int64_t, int64_t)> progress = nullptr;
  int64_t progress_every = 256;
};

struct Candidate {
  Strategy strategy;
  StepEstimate estimate;
  bool fits = false;
  // "fsdp 32 + tp 8 | prefetch 1, reshard, bucket/unit, mb 2x8".
  std::string label() const;
};

struct SearchResult {
  // Evaluated candidates: those that fit by step time (then peak), then the
  // rest by peak.
  std::vector<Candidate> ranked;
  int64_t enumerated = 0;
  int64_t evaluated = 0;
  // Candidates skipped without evaluation: over the memory lower bound, or
  // a group whose step-time lower bound could not enter the top rows.
  int64_t pruned_memory = 0;
  int64_t pruned_bound = 0;
  // Candidates with recompute not tried: their mesh and micro-batch fit
  // with less of it (recompute is for memory; it only adds compute).
  int64_t pruned_recompute = 0;
  // Candidates with offload not tried: their mesh, micro-batch and
  // recompute fit with the optimizer states on the device (offload only
  // adds copies and a slower step).
  int64_t pruned_offload = 0;
  int64_t memory_cap_bytes = 0;
  int64_t host_memory_cap_bytes = 0;
  // The winner is ranked.front() when it fits.
  bool found() const { return !ranked.empty() && ranked.front().fits; }
};

// Prices the search's candidates. The search asks it which tp degrees the
// model allows, a lower bound of a group's memory (to skip groups over the
// cap unpriced) and each candidate's estimate.
class StepPricer {
 public:
  virtual ~StepPricer() = default;
  virtual bool tpAllowed(int64_t tp) = 0;
  // The layers a pipeline may cut the model into chunks of (a chunk holds
  // at least one); 0: no pipeline stages (a graph file).
  virtual int64_t pipelineLayers() const = 0;
  // What tpAllowed asks, for the error when no mesh is left: "tp must
  // divide the 64 heads and the 8 kv heads".
  virtual std::string tpRule() const = 0;
  // A lower bound of the peak device memory per rank of any plan with
  // `strategy`'s mesh, micro-batch, recompute and offload, whatever its
  // prefetch, resharding and buckets.
  virtual int64_t memoryLowerBound(const Strategy& strategy) = 0;
  // A looser, cheaper lower bound of the same, which the search asks
  // first: a group over the cap by it is skipped without the other. 0
  // where there is none cheaper.
  virtual int64_t quickMemoryBound(const Strategy& /*strategy*/) { return 0; }
  virtual absl::StatusOr<StepEstimate> estimate(const Strategy& strategy) = 0;
  // For a strategy with pipeline stages: a lower bound of the step time of
  // every plan with its mesh, micro-batch, schedule and recompute, cheap
  // enough to ask before pricing the pipeline (0: none known).
  virtual double pipelineBound(const Strategy& strategy) = 0;
};

// Searches with `pricer` on `model`'s topology.
absl::StatusOr<SearchResult> searchMesh(const CostModel& model, StepPricer& pricer,
                                        const SearchOptions& options);

// The ranked table (markdown), `rows` rows, the winner first.
std::string formatRanking(const SearchResult& result, int64_t rows);

// Why the winner beat the best candidate on another mesh (or, with one
// mesh, the runner-up): the terms that decided it (exposed communication,
// compute, optimizer) and the memory of both.
std::string explainWinner(const SearchResult& result);

// candidates.json: the search's inputs, counts and every evaluated
// candidate in rank order (docs/planner_cost.md).
nlohmann::json candidatesJson(const SearchResult& result, const Workload& workload,
                              const CostModel& model);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_SEARCH_H_
