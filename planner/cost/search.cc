// The mesh search (see search.h and docs/planner_cost.md, "Search").
#include "planner/cost/search.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace loom::planner::cost {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    out.push_back(d);
    if (d * d != n) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Ranks fitting candidates first by step time (faster first), then by
// peak memory; the rest by peak memory. Ties keep a stable, deterministic
// order through the label.
bool better(const Candidate& a, const Candidate& b) {
  if (a.fits != b.fits) return a.fits;
  if (a.fits) {
    if (a.estimate.step_time_s != b.estimate.step_time_s) {
      return a.estimate.step_time_s < b.estimate.step_time_s;
    }
    if (a.estimate.peak_bytes != b.estimate.peak_bytes) {
      return a.estimate.peak_bytes < b.estimate.peak_bytes;
    }
  } else if (a.estimate.peak_bytes != b.estimate.peak_bytes) {
    return a.estimate.peak_bytes < b.estimate.peak_bytes;
  }
  return a.label() < b.label();
}

std::string gib(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / kGiB);
}

std::string seconds(double s) {
  if (std::abs(s) >= 1) return absl::StrFormat("%.2f s", s);
  return absl::StrFormat("%.1f ms", s * 1e3);
}

// The candidates that share a mesh, a micro-batch, a recompute mode and
// sequence parallelism: they differ only in the fsdp knobs, so they share
// the compute time and the memory bound.
struct Group {
  Strategy base;
  std::vector<Strategy> variants;  // base first
  int64_t memory_bound = 0;
  // The group of the same mesh, micro-batch and sequence parallelism with
  // the next less recompute (-1: none), and whether this group's base fits.
  int64_t less_recompute = -1;
  bool base_fits = false;
  // A sequence-parallel group: its twin without sequence parallelism
  // (-1: none, or sequence parallelism is pinned).
  int64_t without_sp = -1;
  // A group that offloads the optimizer: its twin that does not (-1: none,
  // or offload is pinned).
  int64_t without_offload = -1;
  // The base's estimate, once evaluated.
  std::optional<StepEstimate> base_estimate;
};

// A lower bound on the step time of `group`'s variants from `e`, the
// estimate of the group's base or, for a sequence-parallel group, of its
// twin's base. No variant is faster than the compute time or than any
// stream's busy time. The base gathers one bucket per unit (fewest
// collectives) and reshards; keeping the forward copies (no resharding) is
// the most a variant can take off the fsdp stream: the backward gathers.
// Kept gathers and deferred reductions (`between`) move at most once a step
// what the base moves once a micro-step. Sequence parallelism shards only
// memory-bound ops (GEMMs and attention do the same work), each at most
// into its tp-th part, and leaves the fsdp stream as it is (the norms'
// gradients share the buckets); it turns tp all-reduces into
// reduce-scatters and gathers, so the twin's other streams bound nothing.
double stepTimeBound(const Group& group, const StepEstimate& e, bool fromTwin, bool between) {
  const bool canKeep = group.base.reshard_after_forward &&
                       std::any_of(group.variants.begin(), group.variants.end(),
                                   [](const Strategy& v) { return !v.reshard_after_forward; });
  const double perStep = between ? 1.0 / static_cast<double>(group.base.accumulation) : 1.0;
  const double fsdp = (e.fsdp_stream_s - (canKeep ? e.backward_gather_s : 0)) * perStep;
  const double shrinks = 1.0 - 1.0 / static_cast<double>(group.base.tp);
  const double compute = fromTwin ? e.compute_s - e.memory_bound_s * shrinks : e.compute_s;
  const double other = fromTwin ? 0 : e.other_stream_s * perStep + e.optimizer_s;
  return std::max({compute, fsdp + e.optimizer_s, other});
}

// `base` with every fsdp knob setting the options and pins allow, the base
// (the pipeline's defaults when they are allowed) first. Without an fsdp
// axis the knobs do nothing: the base alone.
std::vector<Strategy> knobVariants(const Strategy& base, const Pins& pins,
                                   const SearchOptions& options) {
  std::vector<int64_t> prefetches = {1};
  std::vector<bool> reshards = {true};
  std::vector<int64_t> buckets = {0};
  if (base.fsdp > 1) {
    reshards = {true, false};
    // Inside pipeline stages the gathers are a stage's few layers': the
    // pipeline's defaults, which keeps the templates few (a pin asks for
    // more).
    if (base.pp == 1) {
      prefetches = options.prefetch_choices;
      buckets = options.bucket_mb_choices;
    }
  }
  // Between micro-steps: each micro-step regathering and reducing, or
  // with every lever that applies (kept gathers need gathers, deferred
  // reductions a data axis); a pin fixes a lever, and one lever alone is
  // a pin's to ask for: searching each alone would double the templates.
  const bool canKeep = base.accumulation > 1 && base.fsdp > 1;
  const bool canDefer = base.accumulation > 1 && base.dp * base.fsdp > 1;
  std::vector<std::pair<bool, bool>> levers = {{false, false}};
  if (pins.keep_gathered || pins.defer_grad_sync) {
    levers = {{pins.keep_gathered.value_or(false) && canKeep,
               pins.defer_grad_sync.value_or(false) && canDefer}};
    if (!pins.keep_gathered && canKeep) levers.push_back({true, levers[0].second});
    if (!pins.defer_grad_sync && canDefer) levers.push_back({levers[0].first, true});
  } else if (canKeep || canDefer) {
    levers.push_back({canKeep, canDefer});
  }
  if (pins.prefetch) prefetches = {*pins.prefetch};
  if (pins.reshard_after_forward) reshards = {*pins.reshard_after_forward};
  if (pins.bucket_mb) buckets = {*pins.bucket_mb};
  std::stable_partition(prefetches.begin(), prefetches.end(), [](int64_t k) { return k == 1; });
  std::vector<Strategy> variants;
  for (const auto& [keep, defer] : levers) {
    // Kept or deferred between micro-steps, the per-micro-step gathers that
    // prefetch and buckets tune are gone or once a step: the levers are
    // tried with the first prefetch and bucket choice only, which keeps the
    // templates they need few.
    const bool between = keep || defer;
    const std::vector<int64_t> prefetchChoices =
        between ? std::vector<int64_t>{prefetches.front()} : prefetches;
    const std::vector<int64_t> bucketChoices =
        between ? std::vector<int64_t>{buckets.front()} : buckets;
    for (bool reshard : reshards) {
      // A kept copy serves the backward too: no second gather.
      if (keep && reshard) continue;
      for (int64_t prefetch : prefetchChoices) {
        for (int64_t bucket : bucketChoices) {
          Strategy s = base;
          s.prefetch = prefetch;
          s.reshard_after_forward = reshard;
          s.bucket_mb = bucket;
          s.keep_gathered = keep;
          s.defer_grad_sync = defer;
          variants.push_back(s);
        }
      }
    }
  }
  return variants;
}

// What the winner keeps or defers between its micro-steps, against the
// fastest evaluated candidate of its mesh, micro-batch and recompute that
// neither keeps nor defers.
std::string betweenMicroSteps(const SearchResult& result) {
  const Strategy& w = result.ranked.front().strategy;
  if (!w.keep_gathered && !w.defer_grad_sync) return "";
  std::vector<std::string> levers;
  if (w.keep_gathered) levers.push_back("keeps the gathered parameters");
  if (w.defer_grad_sync) levers.push_back("reduces the gradients in the last micro-step only");
  std::string out = absl::StrCat(" Between its ", w.accumulation, " micro-steps it ",
                                 absl::StrJoin(levers, " and "));
  const Candidate* twin = nullptr;
  for (const Candidate& c : result.ranked) {
    const Strategy& s = c.strategy;
    if (s.meshSpec() == w.meshSpec() && s.micro_batch == w.micro_batch &&
        s.recompute == w.recompute && !s.keep_gathered && !s.defer_grad_sync) {
      twin = &c;
      break;
    }
  }
  if (twin == nullptr) return absl::StrCat(out, ".");
  const StepEstimate& e = result.ranked.front().estimate;
  const StepEstimate& t = twin->estimate;
  return absl::StrCat(out, ": ", seconds(e.comm_s), " of communication a step instead of ",
                      seconds(t.comm_s),
                      absl::StrFormat(" (%s exposed instead of %s) ", seconds(e.exposed_comm_s),
                                      seconds(t.exposed_comm_s)),
                      "against doing neither (", twin->strategy.knobs(), "), for a peak of ",
                      gib(e.peak_bytes), " instead of ", gib(t.peak_bytes), ".");
}

// The fastest evaluated candidate of the winner's mesh and micro-batch
// that `differs` picks out, preferring one with the winner's own fsdp
// knobs; null if none was evaluated.
const Candidate* fastestAlike(const SearchResult& result,
                              const std::function<bool(const Strategy&)>& differs) {
  const Strategy& w = result.ranked.front().strategy;
  const Candidate* alike = nullptr;
  for (const Candidate& c : result.ranked) {
    const Strategy& s = c.strategy;
    if (s.meshSpec() != w.meshSpec() || s.micro_batch != w.micro_batch || !differs(s)) continue;
    const bool sameKnobs = s.prefetch == w.prefetch &&
                           s.reshard_after_forward == w.reshard_after_forward &&
                           s.bucket_mb == w.bucket_mb && s.keep_gathered == w.keep_gathered &&
                           s.defer_grad_sync == w.defer_grad_sync;
    if (sameKnobs) return &c;
    if (alike == nullptr) alike = &c;
  }
  return alike;
}

// `c`'s step time and peak, or that its peak is over the cap.
std::string against(const SearchResult& result, const Candidate& c) {
  if (!c.fits && c.estimate.peak_bytes <= result.memory_cap_bytes) {
    return absl::StrCat(gib(c.estimate.host_peak_bytes), " of host memory at its peak, over the ",
                        gib(result.host_memory_cap_bytes), " host cap");
  }
  if (!c.fits) {
    return absl::StrCat(gib(c.estimate.peak_bytes), " peak, over the ",
                        gib(result.memory_cap_bytes), " cap");
  }
  return absl::StrCat(seconds(c.estimate.step_time_s), " a step, peak ",
                      gib(c.estimate.peak_bytes));
}

// What sequence parallelism gives the winner, against the same candidate
// without it.
std::string sequenceParallelNote(const SearchResult& result) {
  const Candidate& winner = result.ranked.front();
  const Strategy& w = winner.strategy;
  if (!w.sequence_parallel) return "";
  std::string out = absl::StrCat(" It shards the sequence on tp (sequence parallelism): ",
                                 seconds(winner.estimate.step_time_s), " a step, peak ",
                                 gib(winner.estimate.peak_bytes));
  const Candidate* twin = fastestAlike(result, [&](const Strategy& s) {
    return !s.sequence_parallel && s.recompute == w.recompute &&
           s.offload_optimizer == w.offload_optimizer;
  });
  if (twin == nullptr) {
    return absl::StrCat(out,
                        "; without it no candidate of this mesh and micro-batch was evaluated "
                        "(pinned, or over the cap by the memory bound alone).");
  }
  return absl::StrCat(out, ", against ", against(result, *twin), " without it (",
                      twin->strategy.knobs(), ").");
}

// Why the winner recomputes: what the same mesh and micro-batch give with
// less recompute (the search tries more only where less does not fit).
std::string recomputeNote(const SearchResult& result) {
  const Strategy& w = result.ranked.front().strategy;
  if (w.recompute == Recompute::kNone) return "";
  std::string out =
      absl::StrCat(" It recomputes activations (", recomputeName(w.recompute), ")");
  const Candidate* less = fastestAlike(result, [&](const Strategy& s) {
    return s.recompute < w.recompute && s.sequence_parallel == w.sequence_parallel &&
           s.offload_optimizer == w.offload_optimizer;
  });
  if (less == nullptr) {
    return absl::StrCat(out,
                        ": no candidate of its mesh and micro-batch with less was evaluated "
                        "(pinned, or over the cap by the memory bound alone).");
  }
  return absl::StrCat(out, ": with ", recomputeName(less->strategy.recompute), " recompute, ",
                      against(result, *less), ".");
}

// Why the winner keeps its optimizer states in host memory: what that
// costs, and the same mesh and micro-batch without it (the search tries
// offload only where the states on the device do not fit).
std::string offloadNote(const SearchResult& result) {
  const Candidate& winner = result.ranked.front();
  const Strategy& w = winner.strategy;
  if (!w.offload_optimizer) return "";
  const StepEstimate& e = winner.estimate;
  std::string out = absl::StrCat(
      " It keeps the optimizer states in host memory (offload): host peak ",
      gib(e.host_peak_bytes), " of the ", gib(result.host_memory_cap_bytes),
      " host cap, the host's AdamW ", seconds(e.host_optimizer_s), " and ",
      seconds(e.exposed_copy_s), " of copies exposed a step");
  const Candidate* twin = fastestAlike(result, [&](const Strategy& s) {
    return !s.offload_optimizer && s.recompute == w.recompute &&
           s.sequence_parallel == w.sequence_parallel;
  });
  absl::StrAppend(&out, twin == nullptr
                            ? "; without it this mesh and micro-batch was not evaluated (pinned, "
                              "or over the cap by the memory bound alone)"
                            : absl::StrCat("; without it, ", against(result, *twin)));
  const Candidate* onDevice = nullptr;
  for (const Candidate& c : result.ranked) {
    if (c.fits && !c.strategy.offload_optimizer) {
      onDevice = &c;
      break;
    }
  }
  if (onDevice == nullptr) {
    return absl::StrCat(out, ". No candidate fits with the optimizer states on the device.");
  }
  return absl::StrCat(out, ". It beats the fastest candidate that keeps them there (",
                      onDevice->label(), ", ", seconds(onDevice->estimate.step_time_s), ").");
}

// A pipeline's shape: the schedule and chunks per stage.
struct PipelineChoice {
  stages::PipelineSchedule schedule = stages::PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;
};

// The schedules a mesh of `pp` stages and `micro_batches` micro-batches is
// tried with: 1F1B, and interleaved 1F1B with two and four chunks per
// stage where the micro-batches fill whole groups of the stages
// (Megatron-LM's rule) and the model has the layers. GPipe takes as long as 1F1B and holds more
// micro-batches, so only a pin asks for it.
std::vector<PipelineChoice> pipelineChoices(int64_t pp, int64_t micro_batches, int64_t layers,
                                            const Pins& pins) {
  if (pp == 1) return {PipelineChoice{}};
  std::vector<PipelineChoice> out;
  const auto allowed = [&](const PipelineChoice& c) {
    if (pins.schedule && c.schedule != *pins.schedule) return false;
    if (pins.virtual_stages && c.virtual_stages != *pins.virtual_stages) return false;
    if (pp * c.virtual_stages > layers) return false;
    return c.virtual_stages == 1 || micro_batches % pp == 0;
  };
  std::vector<PipelineChoice> tried = {{stages::PipelineSchedule::k1F1B, 1},
                                       {stages::PipelineSchedule::kGpipe, 1}};
  std::vector<int64_t> interleaved = {2, 4};
  if (pins.virtual_stages) interleaved = {*pins.virtual_stages};
  for (int64_t v : interleaved) {
    if (v > 1) tried.push_back({stages::PipelineSchedule::kInterleaved1F1B, v});
  }
  for (const PipelineChoice& c : tried) {
    const bool gpipe = c.schedule == stages::PipelineSchedule::kGpipe;
    if (allowed(c) && (!gpipe || pins.schedule)) out.push_back(c);
  }
  return out;
}

}  // namespace

std::string Candidate::label() const {
  return absl::StrCat(strategy.parallelism(), " | ", strategy.knobs());
}

absl::Status parsePin(const std::string& text, Pins& pins) {
  const std::vector<std::string> kv = absl::StrSplit(text, absl::MaxSplits('=', 1));
  const std::string help =
      "; pins are key=value with keys pp, virtual-stages, dp, fsdp, tp, prefetch, micro-batch, "
      "bucket-mb (integers), reshard, sequence-parallel, keep-gathered and defer-grad-sync (true "
      "or false), recompute (none, selective, full), offload (none, optimizer) and schedule "
      "(gpipe, 1f1b, interleaved-1f1b), e.g. --pin tp=8";
  if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--pin '", text, "' is not key=value", help));
  }
  const std::string& key = kv[0];
  const std::string& value = kv[1];
  if (key == "schedule") {
    absl::StatusOr<stages::PipelineSchedule> schedule = stages::parseSchedule(value);
    if (!schedule.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--pin schedule='", value, "' is not gpipe, 1f1b or interleaved-1f1b"));
    }
    pins.schedule = *schedule;
    return absl::OkStatus();
  }
  if (key == "offload") {
    if (value != "none" && value != "optimizer") {
      return absl::InvalidArgumentError(
          absl::StrCat("--pin offload='", value, "' is not none or optimizer"));
    }
    pins.offload_optimizer = value == "optimizer";
    return absl::OkStatus();
  }
  if (key == "recompute") {
    const Recompute modes[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
    for (Recompute mode : modes) {
      if (value == recomputeName(mode)) {
        pins.recompute = mode;
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--pin recompute='", value, "' is not none, selective or full"));
  }
  std::optional<bool>* flag = key == "reshard"             ? &pins.reshard_after_forward
                              : key == "sequence-parallel" ? &pins.sequence_parallel
                              : key == "keep-gathered"     ? &pins.keep_gathered
                              : key == "defer-grad-sync"   ? &pins.defer_grad_sync
                                                           : nullptr;
  if (flag != nullptr) {
    if (value != "true" && value != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("--pin ", key, "='", value, "' is not true or false"));
    }
    *flag = value == "true";
    return absl::OkStatus();
  }
  std::optional<int64_t>* slot = key == "pp"              ? &pins.pp
                                 : key == "virtual-stages" ? &pins.virtual_stages
                                 : key == "dp"            ? &pins.dp
                                 : key == "fsdp"        ? &pins.fsdp
                                 : key == "tp"          ? &pins.tp
                                 : key == "prefetch"    ? &pins.prefetch
                                 : key == "micro-batch" ? &pins.micro_batch
                                 : key == "bucket-mb"   ? &pins.bucket_mb
                                                        : nullptr;
  if (slot == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pin '", text, "': unknown key '", key, "'", help));
  }
  int64_t number = 0;
  const int64_t minimum = key == "prefetch" || key == "bucket-mb" ? 0 : 1;
  if (!absl::SimpleAtoi(value, &number) || number < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pin ", key, "='", value, "' is not an integer >= ", minimum));
  }
  *slot = number;
  return absl::OkStatus();
}

namespace {

// Every group of candidates the options and pins allow, in a fixed order:
// pp, tp, dp, micro-batch, pipeline schedule, sequence parallelism, then
// recompute (least first); `rejections` says why meshes were left out.
std::vector<Group> enumerateGroups(const mesh::Topology& topology, int64_t maxTp,
                                   StepPricer& pricer, const SearchOptions& options,
                                   std::vector<std::string>& rejections) {
  const int64_t devices = topology.worldSize();
  const int64_t perHost = topology.devicesPerHost();
  const int64_t layers = pricer.pipelineLayers();
  const Pins& pins = options.pins;
  std::vector<Group> groups;
  auto addGroups = [&](const Strategy& mesh) {
    // Offload after everything that keeps the states on the device, so that
    // each offloaded group follows its twin. Pipelines keep them there: a
    // stage's program is priced without the host's copies and steps.
    std::vector<bool> offloadChoices = {false};
    if (mesh.pp == 1) {
      offloadChoices = pins.offload_optimizer ? std::vector<bool>{*pins.offload_optimizer}
                                              : std::vector<bool>{false, true};
    } else if (pins.offload_optimizer.value_or(false)) {
      offloadChoices.clear();
    }
    // Each (sequence parallelism, recompute mode)'s group without offload.
    std::array<std::array<int64_t, 3>, 2> withoutOffload = {{{-1, -1, -1}, {-1, -1, -1}}};
    for (bool offload : offloadChoices) {
      // Each recompute mode's group without sequence parallelism, for its
      // sequence-parallel twin.
      std::array<int64_t, 3> withoutSp = {-1, -1, -1};
      std::vector<bool> spChoices = {false};
      if (mesh.tp > 1) {
        spChoices = pins.sequence_parallel ? std::vector<bool>{*pins.sequence_parallel}
                                           : std::vector<bool>{false, true};
      }
      for (bool sp : spChoices) {
        // The recompute modes, least costly first; each is tried only where
        // the one before does not fit.
        int64_t lessRecompute = -1;
        for (Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          if (pins.recompute && recompute != *pins.recompute) continue;
          Strategy base = mesh;
          base.recompute = recompute;
          base.sequence_parallel = sp;
          base.offload_optimizer = offload;
          Group group;
          group.less_recompute = lessRecompute;
          group.variants = knobVariants(base, pins, options);
          // Pins that contradict each other (keep-gathered with reshard)
          // leave nothing.
          if (group.variants.empty()) continue;
          group.base = group.variants.front();
          const size_t mode = static_cast<size_t>(recompute);
          int64_t& twin = withoutOffload[sp ? 1 : 0][mode];
          if (offload) {
            group.without_offload = twin;
          } else {
            twin = static_cast<int64_t>(groups.size());
          }
          if (sp) {
            group.without_sp = withoutSp[mode];
          } else {
            withoutSp[mode] = static_cast<int64_t>(groups.size());
          }
          lessRecompute = static_cast<int64_t>(groups.size());
          groups.push_back(std::move(group));
        }
      }
    }
  };
  for (int64_t pp : divisors(devices)) {
    if (pins.pp && pp != *pins.pp) continue;
    if (pp > 1 && pp > layers) continue;
    if (pp > 1 && pins.offload_optimizer.value_or(false)) {
      rejections.push_back("offload is searched on meshes without pipeline stages");
      continue;
    }
    for (int64_t tp : divisors(devices / pp)) {
      if (pins.tp && tp != *pins.tp) continue;
      if (tp > maxTp) continue;
      if (!options.allow_tp_across_hosts && tp > 1 && perHost % tp != 0) continue;
      if (!pricer.tpAllowed(tp)) continue;
      if (pins.sequence_parallel.value_or(false) && tp == 1) continue;
      for (int64_t dp : divisors(devices / pp / tp)) {
        const int64_t fsdp = devices / pp / tp / dp;
        if (pins.dp && dp != *pins.dp) continue;
        if (pins.fsdp && fsdp != *pins.fsdp) continue;
        const int64_t ranks = dp * fsdp;
        if (options.global_batch % ranks != 0) {
          rejections.push_back(absl::StrCat("dp x fsdp = ", ranks, " does not divide the batch"));
          continue;
        }
        const int64_t perRank = options.global_batch / ranks;
        for (int64_t micro : divisors(perRank)) {
          if (pins.micro_batch && micro != *pins.micro_batch) continue;
          if (options.fixed_batch && micro != perRank) continue;
          // A lever pinned on leaves the candidates it cannot apply to: one
          // micro-step, no gathers to keep, no data axis to defer.
          const bool accumulating = micro < perRank;
          if (pins.keep_gathered.value_or(false) && !(accumulating && fsdp > 1)) continue;
          if (pins.defer_grad_sync.value_or(false) && !(accumulating && ranks > 1)) continue;
          for (const PipelineChoice& pipeline :
               pipelineChoices(pp, perRank / micro, layers, pins)) {
            addGroups({.pp = pp,
                       .virtual_stages = pipeline.virtual_stages,
                       .schedule = pipeline.schedule,
                       .dp = dp,
                       .fsdp = fsdp,
                       .tp = tp,
                       .micro_batch = micro,
                       .accumulation = perRank / micro});
          }
        }
      }
    }
  }
  return groups;
}

}  // namespace

absl::StatusOr<SearchResult> searchMesh(const CostModel& model, StepPricer& pricer,
                                        const SearchOptions& options) {
  const mesh::Topology& topology = model.topology();
  const int64_t devices = topology.worldSize();
  const int64_t perHost = topology.devicesPerHost();
  const Pins& pins = options.pins;
  if (pins.keep_gathered.value_or(false) && pins.reshard_after_forward.value_or(false)) {
    return absl::InvalidArgumentError(
        "--pin keep-gathered=true keeps the forward's gathered copy for the backward and the "
        "later micro-steps, so it cannot go with --pin reshard=true; drop one of them");
  }
  if (options.global_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the global batch must be >= 1 sequence, got ", options.global_batch));
  }
  SearchResult result;
  result.memory_cap_bytes =
      options.memory_cap_bytes > 0 ? options.memory_cap_bytes : model.memoryBytes();
  result.host_memory_cap_bytes = options.host_memory_cap_bytes > 0
                                     ? options.host_memory_cap_bytes
                                     : topology.device().host_memory_bytes;
  const int64_t maxTp = options.max_tp > 0              ? options.max_tp
                        : options.allow_tp_across_hosts ? devices
                                                        : perHost;

  // Every candidate, grouped by mesh and micro-batch.
  std::vector<std::string> rejections;
  std::vector<Group> groups = enumerateGroups(topology, maxTp, pricer, options, rejections);
  for (const Group& group : groups) result.enumerated += static_cast<int64_t>(group.variants.size());
  if (groups.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no mesh of ", devices, " devices fits the constraints: ", pricer.tpRule(),
        ", tp must divide the ", perHost, " devices of a host (max tp ", maxTp,
        "), dp x fsdp must divide the batch of ", options.global_batch, " sequences",
        pricer.pipelineLayers() > 0
            ? absl::StrCat(", and pp x virtual stages must not exceed the model's ",
                           pricer.pipelineLayers(), " layers")
            : std::string(", and the model cannot be cut into pipeline stages"),
        rejections.empty() ? "" : absl::StrCat(" (", rejections.front(), ")"),
        "; change --batch, --pin or --max-tp"));
  }

  auto report = [&]() {
    if (options.progress) options.progress(result.evaluated, result.enumerated);
  };
  std::vector<Candidate> evaluated;
  auto evaluate = [&](const Strategy& s) -> absl::StatusOr<Candidate> {
    absl::StatusOr<StepEstimate> estimate = pricer.estimate(s);
    if (!estimate.ok()) return estimate.status();
    evaluated.push_back({.strategy = s,
                         .estimate = *estimate,
                         .fits = estimate->peak_bytes <= result.memory_cap_bytes &&
                                 estimate->host_peak_bytes <= result.host_memory_cap_bytes});
    ++result.evaluated;
    if (options.progress_every > 0 && result.evaluated % options.progress_every == 0) report();
    return evaluated.back();
  };

  // The top-`top` fitting step times so far (a max-heap of the best ones).
  std::priority_queue<double> best;
  const size_t top = static_cast<size_t>(std::max<int64_t>(options.top, 1));
  auto offer = [&](const Candidate& c) {
    if (!c.fits) return;
    best.push(c.estimate.step_time_s);
    if (best.size() > top) best.pop();
  };
  auto cutoff = [&]() {
    return best.size() < top ? std::numeric_limits<double>::infinity() : best.top();
  };

  // Phase 1: each group's base; groups over the memory bound are skipped.
  // The rest of a group waits as two sets, each with its step-time bound:
  // the variants that regather every micro-step, and those that keep or
  // defer between micro-steps. A sequence-parallel group whose twin fits
  // waits whole, under a bound from the twin's estimate.
  enum class Wait { kBase, kRegather, kBetween };
  struct Pending {
    size_t group;
    Wait what;
    double bound;
    bool operator>(const Pending& o) const {
      return bound != o.bound ? bound > o.bound : group > o.group;
    }
  };
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending;
  auto evaluateBase = [&](size_t g) -> absl::Status {
    Group& group = groups[g];
    absl::StatusOr<Candidate> base = evaluate(group.base);
    if (!base.ok()) return base.status();
    group.base_fits = base->fits;
    group.base_estimate = base->estimate;
    // A sequence-parallel group that waited on its twin has no bound yet;
    // the base's sizes are the pricer's last, so it costs a pass over the
    // buffers.
    if (group.memory_bound == 0) group.memory_bound = pricer.memoryLowerBound(group.base);
    offer(*base);
    pending.push({g, Wait::kRegather, stepTimeBound(group, base->estimate, false, false)});
    pending.push({g, Wait::kBetween, stepTimeBound(group, base->estimate, false, true)});
    return absl::OkStatus();
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    Group& group = groups[g];
    // Offload only adds copies and moves the optimizer to the slower host:
    // it is tried where the group does not fit with the states on the
    // device.
    if (!options.exhaustive && group.without_offload >= 0 &&
        groups[group.without_offload].base_fits) {
      group.base_fits = true;
      result.pruned_offload += static_cast<int64_t>(group.variants.size());
      continue;
    }
    // Recompute only adds compute: it is tried where the mesh and
    // micro-batch do not fit with less of it.
    if (!options.exhaustive && group.less_recompute >= 0 &&
        groups[group.less_recompute].base_fits) {
      group.base_fits = true;
      result.pruned_recompute += static_cast<int64_t>(group.variants.size());
      continue;
    }
    // Sequence parallelism shards activations and adds no buffer, so where
    // the twin fits this group does too (template_pricer_test checks it);
    // whether it is faster, its bound decides.
    if (group.without_sp >= 0) {
      const Group& twin = groups[group.without_sp];
      if (twin.base_estimate && twin.base_fits) {
        group.base_fits = true;
        pending.push({g, Wait::kBase, stepTimeBound(group, *twin.base_estimate, true, true)});
        continue;
      }
    }
    // Asked here, not when enumerating, so that a recompute group skipped
    // above costs no template; the quick bound first, which needs none of
    // the group's own.
    if (!options.exhaustive && pricer.quickMemoryBound(group.base) > result.memory_cap_bytes) {
      result.pruned_memory += static_cast<int64_t>(group.variants.size());
      continue;
    }
    group.memory_bound = pricer.memoryLowerBound(group.base);
    if (!options.exhaustive && group.memory_bound > result.memory_cap_bytes) {
      result.pruned_memory += static_cast<int64_t>(group.variants.size());
      continue;
    }
    // A pipeline is priced only while its compute bound can enter the top
    // rows: its stages' programs are planned for it.
    if (!options.exhaustive && group.base.pp > 1) {
      pending.push({g, Wait::kBase, pricer.pipelineBound(group.base)});
      continue;
    }
    if (absl::Status status = evaluateBase(g); !status.ok()) return status;
  }
  // Phase 2: the waiting sets, most promising first, each while its bound
  // can still enter the top rows. A sequence-parallel base evaluated here
  // adds its own two sets.
  while (!pending.empty()) {
    const Pending p = pending.top();
    pending.pop();
    const Group& group = groups[p.group];
    std::vector<const Strategy*> rest;
    if (p.what != Wait::kBase) {
      for (size_t v = 1; v < group.variants.size(); ++v) {
        const Strategy& s = group.variants[v];
        if ((s.keep_gathered || s.defer_grad_sync) == (p.what == Wait::kBetween)) {
          rest.push_back(&s);
        }
      }
    }
    if (!options.exhaustive && p.bound >= cutoff()) {
      result.pruned_bound +=
          p.what == Wait::kBase ? static_cast<int64_t>(group.variants.size())
                                : static_cast<int64_t>(rest.size());
      continue;
    }
    if (p.what == Wait::kBase) {
      if (absl::Status status = evaluateBase(p.group); !status.ok()) return status;
      continue;
    }
    // A variant that does not reshard keeps the copies the base gathers
    // again in its backward: over the cap on that alone, it is not priced.
    const int64_t keptBound = group.memory_bound + group.base_estimate->backward_gather_bytes;
    for (const Strategy* s : rest) {
      if (!options.exhaustive && !s->reshard_after_forward && keptBound > result.memory_cap_bytes) {
        ++result.pruned_memory;
        continue;
      }
      absl::StatusOr<Candidate> c = evaluate(*s);
      if (!c.ok()) return c.status();
      offer(*c);
    }
  }
  report();
  std::sort(evaluated.begin(), evaluated.end(), better);
  result.ranked = std::move(evaluated);
  return result;
}

std::string formatRanking(const SearchResult& result, int64_t rows) {
  std::string out =
      "| rank | mesh | knobs | step (s) | tokens/s/device | MFU | peak memory | exposed comm (s) "
      "| fits |\n| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (int64_t i = 0; i < rows && i < static_cast<int64_t>(result.ranked.size()); ++i) {
    const Candidate& c = result.ranked[i];
    absl::StrAppend(
        &out, absl::StrFormat("| %d | %s | %s | %.3f | %.0f | %.1f%% | %s | %.3f | %s |\n", i + 1,
                              c.strategy.parallelism(), c.strategy.knobs(), c.estimate.step_time_s,
                              c.estimate.tokens_per_s_per_device, 100 * c.estimate.mfu,
                              gib(c.estimate.peak_bytes), c.estimate.exposed_comm_s,
                              c.fits ? "yes" : "no"));
  }
  return out;
}

std::string explainWinner(const SearchResult& result) {
  if (!result.found()) {
    if (result.ranked.empty()) {
      return absl::StrCat("No candidate fits in ", gib(result.memory_cap_bytes),
                          ": every mesh's parameters, optimizer states and saved activations "
                          "alone exceed it.");
    }
    const Candidate& least = result.ranked.front();
    if (least.estimate.peak_bytes <= result.memory_cap_bytes) {
      return absl::StrCat("No candidate fits in ", gib(result.memory_cap_bytes), " of device and ",
                          gib(result.host_memory_cap_bytes),
                          " of host memory; the smallest device peak is ",
                          gib(least.estimate.peak_bytes), " (", least.label(),
                          "), but it offloads ", gib(least.estimate.host_peak_bytes),
                          " to the host, over the host cap.");
    }
    return absl::StrCat("No candidate fits in ", gib(result.memory_cap_bytes),
                        "; the smallest "
                        "peak is ",
                        gib(least.estimate.peak_bytes), " (", least.label(), ").");
  }
  const Candidate& winner = result.ranked.front();
  const Candidate* rival = nullptr;
  for (size_t i = 1; i < result.ranked.size(); ++i) {
    const Candidate& c = result.ranked[i];
    if (c.strategy.meshSpec() != winner.strategy.meshSpec()) {
      rival = &c;
      break;
    }
  }
  if (!rival && result.ranked.size() > 1) rival = &result.ranked[1];
  if (!rival) return absl::StrCat(winner.label(), " is the only candidate.");
  const StepEstimate& w = winner.estimate;
  const StepEstimate& r = rival->estimate;
  struct Term {
    const char* name;
    double winner;
    double rival;
  };
  const Term terms[] = {
      {"exposed communication", w.exposed_comm_s, r.exposed_comm_s},
      {"compute", w.compute_s - w.optimizer_s, r.compute_s - r.optimizer_s},
      {"optimizer", w.optimizer_s, r.optimizer_s},
      {"pipeline bubble", w.bubble_s, r.bubble_s},
  };
  const Term* decisive = &terms[0];
  for (const Term& t : terms) {
    if (t.rival - t.winner > decisive->rival - decisive->winner) decisive = &t;
  }
  std::string out = absl::StrCat(
      "Why ", winner.strategy.parallelism(), " won: against ", rival->label(), ", the step takes ",
      absl::StrFormat("%.4g s instead of %.4g s (%s less)", w.step_time_s, r.step_time_s,
                      seconds(r.step_time_s - w.step_time_s)));
  if (!rival->fits) {
    absl::StrAppend(&out, ", and the runner-up does not fit (", gib(r.peak_bytes), " > ",
                    gib(result.memory_cap_bytes), ")");
  }
  absl::StrAppend(&out, ". ", decisive->name, " decided it (", seconds(decisive->winner), " vs ",
                  seconds(decisive->rival), ")");
  for (const Term& t : terms) {
    if (&t == decisive || (t.winner == 0 && t.rival == 0)) continue;
    absl::StrAppend(&out, "; ", t.name, " ", seconds(t.winner), " vs ", seconds(t.rival));
  }
  absl::StrAppend(&out, ". Peak memory ", gib(w.peak_bytes), " vs ", gib(r.peak_bytes), " of ",
                  gib(result.memory_cap_bytes), ".");
  absl::StrAppend(&out, sequenceParallelNote(result), recomputeNote(result),
                  betweenMicroSteps(result), offloadNote(result));
  return out;
}

nlohmann::json candidatesJson(const SearchResult& result, const Workload& workload,
                              const CostModel& model) {
  nlohmann::json candidates = nlohmann::json::array();
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    const Candidate& c = result.ranked[i];
    const Strategy& s = c.strategy;
    const StepEstimate& e = c.estimate;
    candidates.push_back({{"rank", i + 1},
                          {"label", c.label()},
                          {"mesh", s.meshSpec()},
                          {"axes", s.axes()},
                          {"pp", s.pp},
                          {"virtual_stages", s.virtual_stages},
                          {"schedule", stages::scheduleName(s.schedule)},
                          {"chunk_layers", e.chunk_layers},
                          {"dp", s.dp},
                          {"fsdp", s.fsdp},
                          {"tp", s.tp},
                          {"prefetch", s.prefetch},
                          {"reshard_after_forward", s.reshard_after_forward},
                          {"bucket_mb", s.bucket_mb},
                          {"micro_batch", s.micro_batch},
                          {"accumulation", s.accumulation},
                          {"keep_gathered", s.keep_gathered},
                          {"defer_grad_sync", s.defer_grad_sync},
                          {"recompute", recomputeName(s.recompute)},
                          {"sequence_parallel", s.sequence_parallel},
                          {"offload", s.offload_optimizer ? "optimizer" : "none"},
                          {"step_time_s", e.step_time_s},
                          {"compute_s", e.compute_s},
                          {"comm_s", e.comm_s},
                          {"exposed_comm_s", e.exposed_comm_s},
                          {"optimizer_s", e.optimizer_s},
                          {"bubble_s", e.bubble_s},
                          {"tokens_per_s_per_device", e.tokens_per_s_per_device},
                          {"mfu", e.mfu},
                          {"peak_bytes", e.peak_bytes},
                          {"host_peak_bytes", e.host_peak_bytes},
                          {"comm_bytes_per_rank", e.comm_bytes_per_rank},
                          {"fits", c.fits}});
  }
  const mesh::Topology& topology = model.topology();
  return {{"format", "loom.mesh_search"},
          {"version", 1},
          {"model", workload.model},
          {"seq", workload.seq},
          {"dtype", std::string(dtypeName(workload.dtype))},
          {"devices", topology.worldSize()},
          {"hosts", topology.numHosts()},
          {"devices_per_host", topology.devicesPerHost()},
          {"device", topology.device().name},
          {"machine_profile", model.profile() ? model.profile()->name : ""},
          {"memory_cap_bytes", result.memory_cap_bytes},
          {"host_memory_cap_bytes", result.host_memory_cap_bytes},
          {"enumerated", result.enumerated},
          {"evaluated", result.evaluated},
          {"pruned_memory", result.pruned_memory},
          {"pruned_bound", result.pruned_bound},
          {"pruned_recompute", result.pruned_recompute},
          {"pruned_offload", result.pruned_offload},
          {"explanation", explainWinner(result)},
          {"candidates", candidates}};
}

}  // namespace loom::planner::cost
