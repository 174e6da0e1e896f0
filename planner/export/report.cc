// report.md and trace.json from plan.json (see report.h).
#include "planner/export/report.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "planner/transforms/memory/memory_plan.h"
#include "plan/plan.h"
#include "plan/scope.h"

namespace loom::planner::exporter {
namespace {

using nlohmann::json;

std::string withCommas(int64_t value) {
  std::string digits = absl::StrCat(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

bool hasHostBuffers(const plan::Plan& plan) {
  return std::any_of(plan.buffers.begin(), plan.buffers.end(),
                     [](const plan::Buffer& b) { return b.onHost(); });
}

// Instructions per block and stream (a copy column with offload), and when
// each block starts and ends.
std::string scheduleTable(const plan::Plan& plan) {
  const bool copies = hasHostBuffers(plan);
  std::string out = absl::StrCat(
      "\n## Schedule\n\n| phase | instructions | compute | comm", copies ? " | copy" : "",
      " | async | start (s) | end (s) |\n| --- | ---: | ---: | ---:", copies ? " | ---:" : "",
      " | ---: | ---: | ---: |\n");
  for (const plan::Block& block : plan.programs.front().blocks) {
    int64_t streams[3] = {0, 0, 0}, async = 0;
    double start = -1, end = 0;
    for (const plan::Instruction& in : block.instructions) {
      ++streams[static_cast<int>(in.info->stream)];
      if (in.info->async_start) ++async;
      if (!in.start_s) continue;
      if (start < 0 || *in.start_s < start) start = *in.start_s;
      end = std::max(end, *in.start_s + in.duration_s.value_or(0));
    }
    const auto [compute, comm, copy] = streams;
    absl::StrAppend(&out, absl::StrFormat("| %s | %d | %d | %d", block.name, compute + comm + copy,
                                          compute, comm),
                    copies ? absl::StrCat(" | ", copy) : "",
                    absl::StrFormat(" | %d | %.4f | %.4f |\n", async, start < 0 ? 0.0 : start, end));
  }
  return out;
}

// The price of offload: copies, the host's AdamW steps and host memory.
// Empty without host buffers.
std::string offloadLines(const plan::Plan& plan) {
  if (!plan.predicted.offload) return "";
  const plan::OffloadPredicted& o = *plan.predicted.offload;
  std::string states;
  for (const plan::Buffer& b : plan.buffers) {
    if (b.onHost() && b.role == plan::BufferRole::kOptimizerState) {
      states = "optimizer states (AdamW moments and f32 master copies) in host memory, stepped "
               "on the host";
      break;
    }
  }
  return absl::StrFormat(
      "- offload: %s; copies on the host link (%s, %.1f GB/s) %.4f s of which %.4f s exposed, "
      "host AdamW %.4f s; per step %s to the host and %s back\n"
      "- peak host memory per rank: %s (%s bytes)\n",
      states.empty() ? "buffers in host memory" : states, plan.topology.host.link_class,
      plan.topology.host.bandwidth_bytes_per_s / 1e9, o.copy_s, o.exposed_copy_s,
      o.host_optimizer_s, memory::formatBytes(o.to_host_bytes), memory::formatBytes(o.to_device_bytes),
      memory::formatBytes(o.host_peak_bytes), withCommas(o.host_peak_bytes));
}

// Bytes per role at a peak, and the total.
std::string breakdownTable(const std::string& title, const std::map<std::string, int64_t>& breakdown,
                           int64_t peak) {
  std::string out = absl::StrCat("\n## ", title, " (per rank)\n\n| role | bytes | |\n| --- | ---: | ---: |\n");
  for (const auto& [role, bytes] : breakdown) {
    absl::StrAppend(&out, "| ", role, " | ", withCommas(bytes), " | ", memory::formatBytes(bytes),
                    " |\n");
  }
  absl::StrAppend(&out, "| total | ", withCommas(peak), " | ", memory::formatBytes(peak), " |\n");
  return out;
}

// What plan-recompute repeats, per layer: the ops, the bytes of their
// results (what the layer no longer keeps from its forward to its
// backward) and their predicted time. Empty without recompute.
std::string recomputeTable(const plan::Plan& plan) {
  struct Row {
    int64_t ops = 0;
    int64_t bytes = 0;
    double seconds = 0;
  };
  std::map<std::pair<std::string, int64_t>, Row> rows;
  Row total;
  for (const plan::Instruction* in : plan.programs.front().instructions()) {
    if (!in->recompute) continue;
    const std::optional<plan::RepeatedBlock> block = plan::repeatedBlockOf(in->scope);
    Row& row =
        rows[block ? std::pair{block->stack, block->index} : std::pair{in->scope, int64_t{-1}}];
    int64_t bytes = 0;
    for (int64_t id : in->results) bytes += plan.buffers[id].bytes;
    for (Row* r : {&row, &total}) {
      r->ops += 1;
      r->bytes += bytes;
      r->seconds += in->duration_s.value_or(0);
    }
  }
  if (rows.empty()) return "";
  std::string out =
      "\n## Recompute (per rank)\n\n| layer | ops recomputed | bytes not kept | predicted time (s) "
      "|\n| --- | ---: | ---: | ---: |\n";
  auto line = [&](const std::string& name, const Row& row) {
    absl::StrAppend(&out, absl::StrFormat("| %s | %d | %s | %.6f |\n", name, row.ops,
                                          memory::formatBytes(row.bytes), row.seconds));
  };
  for (const auto& [layer, row] : rows) {
    line(layer.second < 0 ? layer.first : absl::StrCat(layer.first, ".", layer.second), row);
  }
  line("total", total);
  return out;
}

// The parameters' placements, a row each; with `group`, the rows of a
// parameter that every block of a repeated stack has with the same shapes,
// placement and bytes become one ("layers.{0..31}.attention.wq.weight
// (x32)"), at the place of its first layer.
std::string placementsTable(const plan::Plan& plan, bool group) {
  // A parameter row; with `group`, its repeated block and the name after
  // "<stack>.<index>" ("layers", 3, ".attention.wq.weight").
  struct Row {
    std::string name;
    std::string cells;  // "| global | local | placement | bytes |"
    std::optional<plan::RepeatedBlock> block;
    std::string rest;
  };
  // Per unnumbered name ("layers.#.attention.wq.weight"): how many rows
  // have it and their distinct cells; per stack, its block count.
  struct Group {
    int64_t rows = 0;
    std::set<std::string> cells;
  };
  std::vector<Row> rows;
  std::map<std::string, Group> groups;
  std::map<std::string, int64_t> blocksOf;
  for (const plan::Buffer& buffer : plan.buffers) {
    if (buffer.role != plan::BufferRole::kParam) continue;
    std::vector<std::string> placement;
    for (const plan::AxisPlacement& axis : buffer.placement) placement.push_back(axis.toString());
    Row& row =
        rows.emplace_back(Row{.name = buffer.name,
                              .cells = absl::StrCat(" | ", absl::StrJoin(buffer.global_shape, "x"),
                                                    " | ", absl::StrJoin(buffer.local_shape, "x"),
                                                    " | ", absl::StrJoin(placement, ", "), " | ",
                                                    withCommas(buffer.bytes), " |\n"),
                              .block = std::nullopt,
                              .rest = ""});
    if (!group) continue;
    std::optional<plan::RepeatedBlock> block = plan::repeatedBlockOf(row.name);
    if (!block) continue;
    const std::string prefix = absl::StrCat(block->stack, ".", block->index);
    if (row.name.compare(0, prefix.size(), prefix) != 0) continue;
    row.rest = row.name.substr(prefix.size());
    row.block = std::move(block);
    Group& g = groups[row.block->stack + ".#" + row.rest];
    ++g.rows;
    g.cells.insert(row.cells);
    int64_t& blocks = blocksOf[row.block->stack];
    blocks = std::max(blocks, row.block->index + 1);
  }
  std::string out =
      "## Placements\n\n| parameter | global shape | local shape | placement | bytes per rank |\n"
      "| --- | --- | --- | --- | ---: |\n";
  for (const Row& row : rows) {
    if (row.block) {
      const Group& g = groups[row.block->stack + ".#" + row.rest];
      // Alike in every block of the stack: one row, at the first block's.
      if (g.cells.size() == 1 && g.rows == blocksOf[row.block->stack] && g.rows > 1) {
        if (row.block->index != 0) continue;
        absl::StrAppend(&out, "| ", row.block->stack, ".{0..", g.rows - 1, "}", row.rest, " (x",
                        g.rows, ")", row.cells);
        continue;
      }
    }
    absl::StrAppend(&out, "| ", row.name, row.cells);
  }
  return out;
}

}  // namespace

std::string formatReport(const plan::Plan& plan, const ReportOptions& options) {
  const plan::Predicted& predicted = plan.predicted;
  std::string out = absl::StrCat("# Plan: ", plan.model, "\n\n");
  absl::StrAppend(&out, "- mesh: ", absl::StrJoin(plan.mesh.shape(), "x"), " (axes ",
                  absl::StrJoin(plan.mesh.axisNames(), ", "), "; strategies ",
                  absl::StrJoin(plan.strategies, ", "), ")\n");
  absl::StrAppend(&out, "- topology: ", plan.topology.hosts, " host(s) x ",
                  plan.topology.devices_per_host, " ", plan.topology.device, "\n");
  if (plan.micro_batches > 1) {
    bool kept = false, deferred = false;
    for (const plan::Instruction* in : plan.programs.front().instructions()) {
      kept |= in->micro_step == plan::MicroStep::kFirst;
      deferred |= in->micro_step == plan::MicroStep::kLast;
    }
    std::vector<std::string> between;
    if (kept) between.push_back("parameter gathers kept from the first");
    if (deferred) between.push_back("gradient reductions deferred to the last");
    absl::StrAppend(&out, "- optimizer step: ", plan.micro_batches, " micro-steps",
                    between.empty() ? " (each gathers and reduces its own)"
                                    : absl::StrCat(" (", absl::StrJoin(between, "; "), ")"),
                    "\n");
  }
  // Gradients may differ from their parameters in type
  // (plan-insert-collectives' grad-reduce-dtype), so both are shown.
  std::set<std::string> param_types, grad_types;
  for (const plan::Buffer& buffer : plan.buffers) {
    if (buffer.role == plan::BufferRole::kParam)
      param_types.insert(std::string(comm::dtypeName(buffer.dtype)));
    if (buffer.role == plan::BufferRole::kGrad)
      grad_types.insert(std::string(comm::dtypeName(buffer.dtype)));
  }
  if (!param_types.empty()) {
    absl::StrAppend(&out, "- dtypes: params ", absl::StrJoin(param_types, ", "));
    if (!grad_types.empty()) absl::StrAppend(&out, "; gradients ", absl::StrJoin(grad_types, ", "));
    out += "\n";
  }
  absl::StrAppend(
      &out,
      absl::StrFormat("- predicted step: %.4f s (compute %.4f s, communication %.4f s of which "
                      "%.4f s exposed, optimizer %.4f s%s)\n",
                      predicted.step_time_s, predicted.compute_s, predicted.comm_s,
                      predicted.exposed_comm_s, predicted.optimizer_s,
                      predicted.bubble_s > 0
                          ? absl::StrFormat(", pipeline bubble %.4f s", predicted.bubble_s)
                          : std::string()),
      "- peak ", predicted.offload ? "device " : "", "memory per rank: ",
      memory::formatBytes(predicted.peak_bytes), " (", withCommas(predicted.peak_bytes),
      " bytes)\n", offloadLines(plan), "\n");

  out += placementsTable(plan, options.group_layers);

  out +=
      "\n## Collectives per step (per rank)\n\n| axes | kind | count | bytes |\n"
      "| --- | --- | ---: | ---: |\n";
  for (const plan::CommVolume& entry : predicted.comm_volume) {
    absl::StrAppend(&out, "| ", entry.axes, " | ", entry.kind, " | ", entry.count, " | ",
                    withCommas(entry.bytes), " |\n");
  }
  absl::StrAppend(&out, "| all | total | | ", withCommas(predicted.comm_bytes_per_rank), " |\n");

  // Every collective states its wire and accumulation dtypes; the report
  // shows each distinct combination so a bf16-on-the-wire plan is visible.
  std::map<std::string, int64_t> dtype_rows;
  for (const plan::Program& program : plan.programs) {
    for (const plan::Instruction* in : program.instructions()) {
      if (in->info->family != plan::OpFamily::kCollective) continue;
      const plan::Attrs& a = in->attrs;
      const std::string row =
          absl::StrCat("| ", absl::StrJoin(a.mesh_axes, ","), " | ",
                       plan::collectiveKindName(in->info->collective), " | ",
                       std::string(comm::dtypeName(*a.wire_type)), " | ",
                       a.accum_type ? std::string(comm::dtypeName(*a.accum_type)) : "-", " |");
      ++dtype_rows[row];
    }
  }
  out +=
      "\n## Collective dtypes\n\n| axes | kind | wire | accumulate | count |\n"
      "| --- | --- | --- | --- | ---: |\n";
  for (const auto& [row, count] : dtype_rows) absl::StrAppend(&out, row, " ", count, " |\n");

  out += breakdownTable(predicted.offload ? "Device memory at the peak" : "Memory at the peak",
                        predicted.breakdown, predicted.peak_bytes);
  if (predicted.offload) {
    out += breakdownTable("Host memory at the peak", predicted.offload->host_breakdown,
                          predicted.offload->host_peak_bytes);
  }
  return out + recomputeTable(plan) + scheduleTable(plan);
}

json chromeTrace(const plan::Plan& plan) {
  json events = json::array();
  events.push_back({{"ph", "M"},
                    {"pid", 1},
                    {"tid", 1},
                    {"name", "thread_name"},
                    {"args", {{"name", "compute"}}}});
  events.push_back(
      {{"ph", "M"}, {"pid", 1}, {"tid", 2}, {"name", "thread_name"}, {"args", {{"name", "comm"}}}});
  if (hasHostBuffers(plan)) {
    events.push_back(
        {{"ph", "M"}, {"pid", 1}, {"tid", 3}, {"name", "thread_name"}, {"args", {{"name", "copy"}}}});
  }
  events.push_back({{"ph", "M"},
                    {"pid", 1},
                    {"name", "process_name"},
                    {"args", {{"name", "rank 0 (predicted)"}}}});
  for (const plan::Instruction* in : plan.programs.front().instructions()) {
    if (!in->start_s) continue;
    const bool comm = in->commStream();
    const bool copy = in->info->stream == plan::Stream::kCopy;
    const std::string phase = plan::phaseName(in->phase);
    json args = {{"phase", phase}, {"index", in->index}};
    if (comm || copy) args["bytes"] = in->attrs.bytes.value_or(0);
    if (comm) args["axes"] = in->attrs.mesh_axes;
    events.push_back({{"ph", "X"},
                      {"pid", 1},
                      {"tid", comm ? 2 : copy ? 3 : 1},
                      {"name", in->op},
                      {"cat", phase},
                      {"ts", *in->start_s * 1e6},
                      {"dur", in->duration_s.value_or(0) * 1e6},
                      {"args", args}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace loom::planner::exporter
