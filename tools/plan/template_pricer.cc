// Candidates priced from template plans (see template_pricer.h).
#include "tools/plan/template_pricer.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/cost/plan_price.h"
#include "planner/cost/resize_plan.h"
#include "tools/plan/model_loader.h"

namespace loom::tools::plan {
namespace cost = ::loom::planner::cost;

bool TemplatePricer::tpAllowed(int64_t tp) const {
  return config_.num_heads % tp == 0 && config_.num_kv_heads % tp == 0;
}

absl::StatusOr<TemplatePricer::Template*> TemplatePricer::templateFor(const cost::Strategy& s) {
  const bool single = s.dp == 1 && s.fsdp == 1;
  const Key key{s.tp,
                s.dp > 1,
                s.fsdp > 1,
                s.prefetch,
                s.reshard_after_forward,
                s.bucket_mb,
                single ? s.micro_batch : 1};
  if (auto it = templates_.find(key); it != templates_.end()) return &it->second;
  // The template's mesh: the candidate's axes, data axes at 2.
  std::vector<std::string> axes;
  int64_t ranks = 1;
  if (s.dp > 1) axes.push_back("dp=2"), ranks *= 2;
  if (s.fsdp > 1) axes.push_back("fsdp=2"), ranks *= 2;
  if (s.tp > 1) axes.push_back(absl::StrCat("tp=", s.tp));
  if (axes.empty()) axes.push_back("dp=1");
  const int64_t micro = single ? s.micro_batch : 1;
  const int64_t blocks = std::min(config_.num_layers, cost::kTemplateBlocks);
  mlir::MLIRContext context;
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module = loadModel(
      context,
      {.model = model_, .batch = micro * ranks, .seq = seq_, .dtype = dtype_, .layers = blocks});
  if (!module.ok()) return module.status();
  PlanRequest request = base_;
  request.mesh = absl::StrJoin(axes, ",");
  request.axes = "";
  request.prefetch = s.prefetch;
  request.reshard_after_forward = s.reshard_after_forward;
  request.bucket_mb = s.bucket_mb;
  request.check_memory = false;
  absl::StatusOr<PlanResult> planned = planModule(**module, request);
  if (!planned.ok()) return planned.status();
  Template made{.shorter = std::move(planned->plan), .repeated = {}, .micro_batch = micro};
  if (blocks < config_.num_layers) {
    absl::StatusOr<cost::Repeated> repeated = cost::repeatBlocks(made.shorter, config_.num_layers);
    if (!repeated.ok()) return repeated.status();
    made.repeated = *std::move(repeated);
  } else {
    made.repeated.plan = made.shorter;
    for (const loom::plan::Buffer& b : made.shorter.buffers) made.repeated.source.push_back(b.id);
  }
  return &templates_.emplace(key, std::move(made)).first->second;
}

absl::StatusOr<const loom::plan::Plan*> TemplatePricer::planFor(const cost::Strategy& s) {
  absl::StatusOr<Template*> t = templateFor(s);
  if (!t.ok()) return t.status();
  cost::Resize resize{
      .axis_sizes = {}, .template_micro_batch = (*t)->micro_batch, .micro_batch = s.micro_batch};
  if (s.dp > 1) resize.axis_sizes["dp"] = s.dp;
  if (s.fsdp > 1) resize.axis_sizes["fsdp"] = s.fsdp;
  absl::StatusOr<loom::plan::Plan> resized = cost::resizePlan((*t)->shorter, resize);
  if (!resized.ok()) return resized.status();
  cost::copySizes(*resized, (*t)->repeated);
  return &(*t)->repeated.plan;
}

// What every variant of the mesh and micro-batch holds at the end of the
// forward phase: the resident parameters and optimizer states, and the
// activations live there (the saved ones; prefetch, resharding and buckets
// change only gathered copies and gradients).
int64_t TemplatePricer::memoryLowerBound(const cost::Strategy& strategy) {
  absl::StatusOr<const loom::plan::Plan*> plan = planFor(strategy);
  if (!plan.ok()) return 0;  // estimate() reports the error
  const loom::plan::Plan& p = **plan;
  // The end of the forward phase: every activation the backward reads is
  // live there.
  int64_t at = -2;
  for (const loom::plan::Block& block : p.programs.front().blocks) {
    if (block.phase == loom::plan::Phase::kForward && !block.instructions.empty()) {
      at = block.instructions.back().order;
    }
  }
  int64_t bytes = 0;
  for (const loom::plan::Buffer& b : p.buffers) {
    const bool saved =
        b.role == loom::plan::BufferRole::kActivation && b.live.first <= at && at <= b.live.last;
    if (loom::plan::persistentRole(b.role) || saved) bytes += b.bytes;
  }
  return bytes;
}

absl::StatusOr<cost::StepEstimate> TemplatePricer::estimate(const cost::Strategy& s) {
  absl::StatusOr<const loom::plan::Plan*> plan = planFor(s);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<cost::PlanPrice> price = cost::pricePlan(**plan, cost_);
  if (!price.ok()) return price.status();
  // One micro-step's program, run `accumulation` times, then the optimizer.
  const double a = static_cast<double>(s.accumulation);
  const double optimizer = price->optimizer_s;
  cost::StepEstimate e;
  e.optimizer_s = optimizer;
  e.step_time_s = (price->timing.step_time_s - optimizer) * a + optimizer;
  e.compute_s = (price->timing.compute_s - optimizer) * a + optimizer;
  e.comm_s = price->timing.comm_s * a;
  e.exposed_comm_s = price->timing.exposed_comm_s * a;
  e.peak_bytes = price->peak_bytes;
  e.breakdown = price->breakdown;
  e.comm_bytes_per_rank = price->comm_bytes_per_rank * s.accumulation;
  e.tokens_per_step = s.globalBatch() * seq_;
  // The graph's FLOPs (forward and backward as planned) per device.
  e.model_flops_per_device = price->model_flops * a;
  e.tokens_per_s_per_device =
      static_cast<double>(e.tokens_per_step) / e.step_time_s / static_cast<double>(s.devices());
  const cost::Dtype dtype = dtype_ == "f32"   ? cost::Dtype::kF32
                            : dtype_ == "f16" ? cost::Dtype::kF16
                                              : cost::Dtype::kBF16;
  e.mfu = e.model_flops_per_device / (e.step_time_s * cost_.peakFlops(dtype));
  for (size_t i = 0; i < price->stream_s.size(); ++i) {
    if (price->stream_axes[i] == "fsdp") {
      e.fsdp_stream_s = price->stream_s[i] * a;
    } else {
      e.other_stream_s = std::max(e.other_stream_s, price->stream_s[i] * a);
    }
  }
  e.backward_gather_s = price->backward_gather_s * a;
  return e;
}

}  // namespace loom::tools::plan
