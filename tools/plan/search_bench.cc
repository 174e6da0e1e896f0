// search_bench: times `plan --mesh=auto` (the search, then planning the
// winner through the pipeline) for Llama 3 8B, 70B and 405B and GPT-2 XL
// and prints a table; then the cost model's predictions for published
// training runs next to their measured throughput, what pricing one
// candidate from a template plan costs, step by step, the winner against
// pinned searches, and the pipeline targets (`search_bench pipelines` runs
// those alone). Run with -c opt; the figures are
// recorded in docs/planner_cost.md, never asserted.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "mesh/topology.h"
#include "mlir/IR/MLIRContext.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/plan_price.h"
#include "planner/cost/repeat_blocks.h"
#include "planner/cost/resize_plan.h"
#include "planner/cost/search.h"
#include "planner/cost/strategy.h"
#include "planner/models/model_config.h"
#include "tools/plan/auto_plan.h"
#include "tools/plan/model_loader.h"
#include "tools/plan/plan_pipeline.h"
#include "tools/plan/template_pricer.h"

namespace {

struct Case {
  const char* model;
  int64_t devices;
  const char* device;
  // A pinned recompute mode; null: the search chooses.
  const char* recompute = nullptr;
};

namespace cost = ::loom::planner::cost;

// A published run: the model, the mesh, the per-rank batch and the
// measured tokens/s per GPU (bf16 on H100; sources in docs/planner_cost.md).
struct Published {
  const char* name;
  const char* model;
  int64_t seq;
  cost::Strategy strategy;
  double tokens_per_s_per_gpu;
};

// Prints the model's prediction for each published run with the
// recompute it used (selective for 8B, full for 70B), ignoring whether it
// fits.
int published() {
  const Published kRuns[] = {
      {"torchtitan 8B FSDP 8 (eager)",
       "llama3-8b",
       8192,
       {.fsdp = 8, .micro_batch = 2, .recompute = cost::Recompute::kSelective},
       5762},
      {"torchtitan 8B FSDP 128 (eager)",
       "llama3-8b",
       8192,
       {.fsdp = 128, .micro_batch = 2, .recompute = cost::Recompute::kSelective},
       5605},
      {"torchtitan 8B FSDP 8 x TP 8 (compile)",
       "llama3-8b",
       8192,
       {.fsdp = 8, .tp = 8, .micro_batch = 12, .recompute = cost::Recompute::kSelective},
       4378},
      {"torchtitan 70B FSDP 32 x TP 8 (compile)",
       "llama3-70b",
       8192,
       {.fsdp = 32, .tp = 8, .micro_batch = 16, .recompute = cost::Recompute::kFull},
       597.3},
  };
  std::printf("\n%-40s %9s %9s %7s %9s %9s %7s\n", "published run", "measured", "predicted",
              "ratio", "pred_MFU", "exposed_s", "fwd_s");
  for (const Published& run : kRuns) {
    const cost::Strategy& s = run.strategy;
    auto topology = loom::mesh::Topology::dgxH100((s.devices() + 7) / 8);
    auto model = cost::CostModel::create(*topology);
    auto config = loom::planner::models::publishedConfig(run.model);
    if (!topology.ok() || !model.ok() || !config.ok()) return 1;
    loom::tools::plan::TemplatePricer pricer({.model = run.model,
                                              .config = *config,
                                              .seq = run.seq,
                                              .dtype = cost::Dtype::kBF16,
                                              .graph_batch = 0},
                                             {.model_name = run.model}, *model);
    absl::StatusOr<cost::StepEstimate> e = pricer.estimate(s);
    if (!e.ok()) {
      std::fprintf(stderr, "search_bench: %s\n", std::string(e.status().message()).c_str());
      return 1;
    }
    // A full recomputation repeats the forward: a third of the FLOPs.
    const double forward = (e->compute_s - e->optimizer_s) / 3;
    std::printf("%-40s %9.1f %9.1f %7.2f %8.1f%% %9.3f %7.3f\n", run.name, run.tokens_per_s_per_gpu,
                e->tokens_per_s_per_device, e->tokens_per_s_per_device / run.tokens_per_s_per_gpu,
                100 * e->mfu, e->exposed_comm_s, forward);
  }
  return 0;
}

// What pricing one candidate from a template plan costs, step by step, at
// full scale: once per template, the pipeline on kTemplateBlocks blocks and
// repeatBlocks to the model's depth; per candidate, resizePlan to its data
// axes and priceProgram on the repeated program with those sizes; against
// the whole pipeline on every layer, whose figures they equal.
int templatePricing() {
  struct Run {
    const char* model;
    int64_t fsdp, tp, micro_batch;
  };
  const Run kRuns[] = {{"llama3-8b", 16, 1, 1}, {"llama3-70b", 128, 8, 1}};
  std::printf("\n%-11s %-12s %9s %8s %8s %8s %9s %9s %s\n", "model", "mesh", "template", "repeat",
              "resize", "price", "pipeline", "step_s", "equal");
  for (const Run& run : kRuns) {
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t) {
      return std::chrono::duration<double>(Clock::now() - t).count();
    };
    auto config = loom::planner::models::publishedConfig(run.model);
    if (!config.ok()) return 1;
    const std::string mesh = run.tp > 1 ? absl::StrCat("fsdp=", run.fsdp, ",tp=", run.tp)
                                        : absl::StrCat("fsdp=", run.fsdp);
    const loom::tools::plan::PlanRequest request{.model_name = run.model, .mesh = mesh};
    auto plan = [&](int64_t layers, int64_t fsdp) -> absl::StatusOr<loom::plan::Plan> {
      mlir::MLIRContext context;
      const std::string m =
          run.tp > 1 ? absl::StrCat("fsdp=", fsdp, ",tp=", run.tp) : absl::StrCat("fsdp=", fsdp);
      auto module = loom::tools::plan::loadModel(context, {.model = run.model,
                                                           .batch = run.micro_batch * fsdp,
                                                           .seq = 2048,
                                                           .dtype = "bf16",
                                                           .layers = layers});
      if (!module.ok()) return module.status();
      loom::tools::plan::PlanRequest r = request;
      r.mesh = m;
      auto planned = loom::tools::plan::planModule(**module, r);
      if (!planned.ok()) return planned.status();
      return planned->plan;
    };
    Clock::time_point t = Clock::now();
    auto shorter = plan(cost::kTemplateBlocks, 2);
    const double templateS = since(t);
    // Once per template: its repeated structure; per candidate: resize the
    // template and price the structure with its sizes.
    t = Clock::now();
    auto repeated = shorter.ok() ? cost::repeatBlocks(*shorter, config->num_layers)
                                 : absl::StatusOr<cost::Repeated>(shorter.status());
    const double repeatS = since(t);
    t = Clock::now();
    auto resized = shorter.ok() ? cost::resizePlan(*shorter, {.axis_sizes = {{"fsdp", run.fsdp}},
                                                              .template_micro_batch = 1,
                                                              .micro_batch = run.micro_batch})
                                : absl::StatusOr<loom::plan::Plan>(shorter.status());
    const double resizeS = since(t);
    auto topology = loom::tools::plan::topologyFor(request, run.fsdp * run.tp);
    auto model = topology.ok() ? cost::CostModel::create(*topology)
                               : absl::StatusOr<cost::CostModel>(topology.status());
    if (!repeated.ok() || !resized.ok() || !model.ok()) {
      std::fprintf(stderr, "search_bench: %s %s %s\n", repeated.status().ToString().c_str(),
                   resized.status().ToString().c_str(), model.status().ToString().c_str());
      return 1;
    }
    t = Clock::now();
    auto price = cost::priceProgram(cost::RepeatedProgram(*resized, *resized, *repeated), *model);
    const double priceS = since(t);
    t = Clock::now();
    auto full = plan(config->num_layers, run.fsdp);
    const double pipelineS = since(t);
    if (!price.ok() || !full.ok()) return 1;
    const bool equal = price->timing.step_time_s == full->predicted.step_time_s &&
                       price->peak_bytes == full->predicted.peak_bytes;
    std::printf("%-11s %-12s %9.3f %8.4f %8.4f %8.4f %9.3f %9.4f %s\n", run.model, mesh.c_str(),
                templateS, repeatS, resizeS, priceS, pipelineS, price->timing.step_time_s,
                equal ? "yes" : "NO");
  }
  return 0;
}

// The search's winner against the best layout each pin allows (tp degree
// x sequence parallelism x recompute mode), on the cases the recompute issue names: the winner
// must be at least as fast as every pinned search's, which checks the
// search's pruning and its recompute rule on full-size models. One pricer
// per case, so that the pinned searches reuse its templates.
int pinnedSearches() {
  struct Run {
    const char* model;
    int64_t devices;
  };
  const Run kRuns[] = {
      {"llama3-8b", 8}, {"llama3-8b", 128}, {"llama3-70b", 256}, {"llama3-405b", 1024}};
  const cost::Recompute kModes[] = {cost::Recompute::kNone, cost::Recompute::kSelective,
                                    cost::Recompute::kFull};
  std::printf("\n%-12s %7s %-25s %10s %10s %s\n", "model", "devices", "pin", "pinned_s", "winner_s",
              "winner <= pinned");
  int failures = 0;
  for (const Run& run : kRuns) {
    auto topology = loom::mesh::Topology::dgxH100((run.devices + 7) / 8);
    auto model = topology.ok() ? cost::CostModel::create(*topology)
                               : absl::StatusOr<cost::CostModel>(topology.status());
    auto config = loom::planner::models::publishedConfig(run.model);
    if (!model.ok() || !config.ok()) return 1;
    loom::tools::plan::TemplatePricer pricer({.model = run.model,
                                              .config = *config,
                                              .seq = 2048,
                                              .dtype = cost::Dtype::kBF16,
                                              .graph_batch = 0},
                                             {.model_name = run.model}, *model);
    auto search = [&](const cost::Pins& pins) {
      return cost::searchMesh(*model, pricer, {.global_batch = run.devices, .pins = pins});
    };
    absl::StatusOr<cost::SearchResult> free = search({});
    if (!free.ok() || !free->found()) return 1;
    const double winner = free->ranked.front().estimate.step_time_s;
    for (int64_t tp : {1, 2, 4, 8}) {
      for (bool sp : {false, true}) {
        if (sp && tp == 1) continue;
        for (cost::Recompute mode : kModes) {
          cost::Pins pins;
          pins.tp = tp;
          pins.sequence_parallel = sp;
          pins.recompute = mode;
          absl::StatusOr<cost::SearchResult> pinned = search(pins);
          if (!pinned.ok() || !pinned->found()) continue;  // nothing fits with this pin
          const double step = pinned->ranked.front().estimate.step_time_s;
          const bool ok = winner <= step;
          failures += !ok;
          std::printf("%-12s %7lld %-25s %10.4f %10.4f %s\n", run.model,
                      static_cast<long long>(run.devices),
                      absl::StrCat("tp=", tp, sp ? " sp" : "", " recompute=",
                                   cost::recomputeName(mode))
                          .c_str(),
                      step, winner, ok ? "yes" : "NO");
        }
      }
    }
  }
  return failures == 0 ? 0 : 1;
}

// The pipeline targets (docs/planner_stages.md, "Pipelines in the
// search"): the free search on each published scale, its time, and its
// winner against the best candidate of every (pp, tp) pin and of each
// published layout. The winner must be at least as fast as every one;
// tp stays inside a host (8 devices), pipeline stages cross hosts.
struct PipelineTarget {
  const char* name;
  const char* model;
  int64_t devices;
  const char* device;
  int64_t seq;
  int64_t batch;
  // Published layouts, as pins ("pp=16,tp=8,dp=128").
  std::vector<std::pair<const char*, const char*>> published;
};

// `only`: the targets whose name contains it (all when empty).
int pipelineTargets(const std::string& only) {
  const char* kGpt39b =
      "tiny:family=gpt2,layers=48,hidden=8192,heads=64,kv_heads=64,ffn=32768,vocab=51200,seq=2048";
  const char* kGpt76b =
      "tiny:family=gpt2,layers=60,hidden=10240,heads=80,kv_heads=80,ffn=40960,vocab=51200,"
      "seq=2048";
  const std::vector<PipelineTarget> kTargets = {
      {"Llama 3 405B, 16384 H100 (16M tokens)", "llama3-405b", 16384, "h100", 8192, 2048,
       {{"Llama 3 paper: tp 8 x pp 16 x dp 128", "pp=16,tp=8,dp=128,fsdp=1"},
        {"the same with fsdp 128", "pp=16,tp=8,dp=1,fsdp=128"}}},
      {"Llama 3 405B, 8192 H100 (16M tokens)", "llama3-405b", 8192, "h100", 8192, 2048,
       {{"Llama 3 paper: tp 8 x pp 16 x dp 64", "pp=16,tp=8,dp=64,fsdp=1"}}},
      {"Llama 3 405B, 512 H100 (torchtitan)", "llama3-405b", 512, "h100", 8192, 512,
       {{"torchtitan: fsdp 8 x tp 8 x pp 8", "pp=8,tp=8,dp=1,fsdp=8"}}},
      {"GPT 39B, 512 A100 (Megatron-LM)", kGpt39b, 512, "a100-80gb", 2048, 1536,
       {{"Megatron-LM: tp 8 x pp 2 x dp 32", "pp=2,tp=8,dp=32,fsdp=1"}}},
      {"GPT 76B, 1024 A100 (Megatron-LM)", kGpt76b, 1024, "a100-80gb", 2048, 1792,
       {{"Megatron-LM: tp 8 x pp 4 x dp 32", "pp=4,tp=8,dp=32,fsdp=1"}}},
  };
  int failures = 0;
  std::printf("\n%-40s %-44s %10s %10s %s\n", "target", "pin", "pinned_s", "winner_s",
              "winner <= pinned");
  for (const PipelineTarget& target : kTargets) {
    if (std::string(target.name).find(only) == std::string::npos) continue;
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const std::clock_t cpuStart = std::clock();
    mlir::MLIRContext context;
    absl::StatusOr<loom::tools::plan::AutoResult> result = loom::tools::plan::planAuto(
        context, {.model = target.model,
                  .devices = target.devices,
                  .batch = target.batch,
                  .seq = target.seq,
                  .device = target.device});
    if (!result.ok()) {
      std::fprintf(stderr, "search_bench: %s: %s\n", target.name,
                   std::string(result.status().message()).c_str());
      return 1;
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    const double cpu = static_cast<double>(std::clock() - cpuStart) / CLOCKS_PER_SEC;
    const cost::Candidate& winner = result->search.ranked.front();
    std::printf("%-40s search %.3f s, plan %.3f s (%.3f s wall, %.3f s cpu in all); %lld "
                "candidates, %lld evaluated; winner %s: %.4f s, MFU %.1f%%, peak %.1f GiB\n",
                target.name, result->search_s, result->plan_s, wall, cpu,
                static_cast<long long>(result->search.enumerated),
                static_cast<long long>(result->search.evaluated), winner.label().c_str(),
                winner.estimate.step_time_s, 100 * winner.estimate.mfu,
                static_cast<double>(winner.estimate.peak_bytes) / (1 << 30));
    // The pins share one pricer, so its templates serve them all.
    auto topology = loom::tools::plan::topologyFor(
        {.device = target.device, .devices_per_host = 8}, target.devices);
    auto model = topology.ok() ? cost::CostModel::create(*topology)
                               : absl::StatusOr<cost::CostModel>(topology.status());
    auto config = loom::planner::models::configFromSpec(target.model);
    if (!model.ok() || !config.ok()) return 1;
    loom::tools::plan::TemplatePricer pricer({.model = target.model,
                                              .config = *config,
                                              .seq = target.seq,
                                              .dtype = cost::Dtype::kBF16,
                                              .graph_batch = 0},
                                             {.model_name = target.model,
                                              .device = target.device},
                                             *model);
    std::vector<std::pair<std::string, std::string>> pins;
    for (const auto& [name, spec] : target.published) pins.emplace_back(name, spec);
    for (int64_t pp : {1, 2, 4, 8, 16, 32}) {
      for (int64_t tp : {1, 2, 4, 8}) {
        pins.emplace_back(absl::StrCat("pp=", pp, ",tp=", tp), absl::StrCat("pp=", pp, ",tp=", tp));
      }
    }
    for (const auto& [name, spec] : pins) {
      cost::Pins parsed;
      bool valid = true;
      for (absl::string_view pin : absl::StrSplit(spec, ',')) {
        valid = valid && cost::parsePin(std::string(pin), parsed).ok();
      }
      absl::StatusOr<cost::SearchResult> pinned =
          valid ? cost::searchMesh(*model, pricer, {.global_batch = target.batch, .pins = parsed})
                : absl::StatusOr<cost::SearchResult>(absl::InvalidArgumentError(spec));
      if (!pinned.ok() || !pinned->found()) {
        std::printf("%-40s %-44s %10s %10.4f %s\n", "", name.c_str(), "none fits",
                    winner.estimate.step_time_s, "-");
        continue;
      }
      const double step = pinned->ranked.front().estimate.step_time_s;
      const bool ok = winner.estimate.step_time_s <= step;
      failures += !ok;
      std::printf("%-40s %-44s %10.4f %10.4f %s (%s)\n", "", name.c_str(), step,
                  winner.estimate.step_time_s, ok ? "yes" : "NO",
                  pinned->ranked.front().label().c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // `search_bench pipelines [NAME]`: the pipeline targets alone (those
  // whose name contains NAME).
  if (argc > 1 && std::string(argv[1]) == "pipelines") {
    return pipelineTargets(argc > 2 ? argv[2] : "");
  }
  // Each case with the search choosing recompute, and the first ones again
  // without it (the search space before recompute).
  constexpr Case kCases[] = {
      {"llama3-8b", 128, "h100"},          {"llama3-70b", 256, "h100"},
      {"llama3-70b", 1024, "h100"},        {"llama3-405b", 1024, "h100"},
      {"gpt2-xl", 64, "a100-80gb"},        {"llama3-70b", 1024, "h100", "none"},
      {"gpt2-xl", 64, "a100-80gb", "none"}};
  // Wall times, and the process's CPU time for the whole run (the search
  // and the winner's plan run on one thread), which a busy machine
  // inflates less.
  std::printf("%-12s %7s %9s %10s %9s %10s %9s %9s %9s %9s %9s  %s\n", "model", "devices",
              "recompute", "candidates", "evaluated", "placements", "templates", "search_s",
              "plan_s", "total_s", "cpu_s", "winner");
  for (const Case& c : kCases) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const std::clock_t cpuStart = std::clock();
    mlir::MLIRContext context;
    absl::StatusOr<loom::tools::plan::AutoResult> result = loom::tools::plan::planAuto(
        context,
        {.model = c.model,
         .devices = c.devices,
         .device = c.device,
         .recompute = c.recompute ? std::optional<std::string>(c.recompute) : std::nullopt});
    if (!result.ok()) {
      std::fprintf(stderr, "search_bench: %s\n", std::string(result.status().message()).c_str());
      return 1;
    }
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    const double cpu = static_cast<double>(std::clock() - cpuStart) / CLOCKS_PER_SEC;
    const auto& winner = result->search.ranked.front();
    std::printf("%-12s %7lld %9s %10lld %9lld %10lld %9lld %9.3f %9.3f %9.3f %9.3f  %s\n", c.model,
                static_cast<long long>(c.devices), c.recompute ? c.recompute : "searched",
                static_cast<long long>(result->search.enumerated),
                static_cast<long long>(result->search.evaluated),
                static_cast<long long>(result->placements),
                static_cast<long long>(result->templates), result->search_s, result->plan_s, total,
                cpu, winner.label().c_str());
  }
  if (int status = published(); status != 0) return status;
  if (int status = templatePricing(); status != 0) return status;
  if (int status = pinnedSearches(); status != 0) return status;
  return pipelineTargets("");
}
