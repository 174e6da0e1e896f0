// `plan --mesh=auto`: searches meshes and strategies (planner/cost/search.h),
// pricing each candidate from the pipeline's own programs
// (template_pricer.h), then plans the winner through the pipeline
// (plan_pipeline.h), so its plan.json, report and trace are the ordinary
// ones and equal the search's figures for it.
#ifndef LOOM_TOOLS_PLAN_AUTO_PLAN_H_
#define LOOM_TOOLS_PLAN_AUTO_PLAN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "nlohmann/json.hpp"
#include "planner/cost/cost_model.h"
#include "planner/cost/machine_profile.h"
#include "planner/cost/search.h"
#include "planner/cost/strategy.h"
#include "planner/export/visual_report.h"
#include "tools/plan/plan_pipeline.h"

namespace loom::tools::plan {

struct AutoRequest {
  // A published model, a tiny spec, a Hugging Face config.json or a .mlir
  // graph (its batch is then the global batch, its shapes fixed).
  std::string model;
  int64_t devices = 0;
  // Sequences per optimizer step over all devices (default: one per
  // device); the sequence length (default min(max_seq, 2048)); the
  // parameter type (default bf16 on GPUs, f32 on cpu).
  std::optional<int64_t> batch = std::nullopt;
  std::optional<int64_t> seq = std::nullopt;
  std::optional<std::string> dtype = std::nullopt;
  std::string device = "h100";
  int64_t devices_per_host = 8;
  // GiB per device; 0: the device's (or the profile's) memory.
  double memory_gb = 0;
  // Host memory per device for offloaded buffers in GiB; 0: the device's
  // share of its host.
  double host_memory_gb = 0;
  uint64_t seed = 0;
  // The winner's AdamW hyperparameters (the search does not depend on them).
  PlanRequest::AdamW adamw = {};
  planner::cost::Pins pins = {};
  int64_t max_tp = 0;
  bool allow_tp_across_hosts = false;
  // Borrowed, may be null.
  const planner::cost::MachineProfile* profile = nullptr;
  std::function<void(int64_t, int64_t)> progress = nullptr;
  // plan-insert-collectives' gradient reduction type (bf16, f32; empty: the
  // parameter type), for the candidates and the winner alike.
  std::string grad_reduce_dtype = "";
  // plan-recompute's mode, pinned for every candidate (unset or "auto":
  // the search chooses none, selective or full per candidate), and its
  // every-k-th layer, for the candidates and the winner alike.
  std::optional<std::string> recompute = std::nullopt;
  int64_t recompute_every = 1;
};

struct AutoResult {
  planner::cost::Workload workload;
  // A graph file (planned whole, at its batch) rather than a configuration.
  bool graph = false;
  // Placement-stage runs and template plans the search made.
  int64_t placements = 0;
  int64_t templates = 0;
  planner::cost::SearchResult search;
  // candidates.json.
  nlohmann::json candidates;
  // The winner as the pipeline planned it: its request (mesh, axes,
  // knobs, the micro-step's batch), its plan.json and per-rank program.
  PlanRequest winner;
  int64_t winner_batch = 0;
  PlanResult plan;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  double search_s = 0;
  double plan_s = 0;
};

// Searches, then plans the winner in `context`. Fails when the devices do
// not fill hosts, a graph has no batch input,
// no mesh satisfies the pins, or no candidate fits in memory (the message
// names the smallest peak and how to fit).
absl::StatusOr<AutoResult> planAuto(mlir::MLIRContext& context, const AutoRequest& request);

// The markdown the tool prints and report.md starts with: the search's
// inputs and counts, the ranked table (`rows` rows) and why the winner won.
std::string formatSearch(const AutoResult& result, int64_t rows);

// Every candidate of a search as plan-html's search chart draws it: the
// tool joins the search and the page, so neither depends on the other.
std::vector<planner::visual::SearchPoint> searchPoints(const planner::cost::SearchResult& result);

}  // namespace loom::tools::plan

#endif  // LOOM_TOOLS_PLAN_AUTO_PLAN_H_
