// Writing plan.json (plan.h's writePlan): the inverse of the reader, field
// for field. nlohmann's object keys are sorted, so equal plans give equal
// text.
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "plan/attrs_codec.h"
#include "plan/plan.h"

namespace loom::plan {
namespace {

using json = nlohmann::json;

json placementJson(const Placement& placement) {
  json out = json::array();
  for (const AxisPlacement& axis : placement) out.push_back(axis.toString());
  return out;
}

// The shortest decimal that reads back as `value` (0.02, not the
// 0.0199999995529 a float widened to double prints as).
double shortest(float value) {
  char text[32];
  const std::to_chars_result end = std::to_chars(text, text + sizeof(text), value);
  return std::strtod(std::string(text, end.ptr).c_str(), nullptr);
}

json initJson(const std::optional<InitSpec>& init) {
  if (!init) return nullptr;
  const char* kind = init->kind == InitSpec::Kind::kNormal  ? "normal"
                     : init->kind == InitSpec::Kind::kZeros ? "zeros"
                                                            : "ones";
  return {{"kind", kind}, {"mean", shortest(init->mean)}, {"std", shortest(init->std)}, {"seed", init->seed},
          {"stream", init->stream_id}};
}

json bufferJson(const Buffer& b) {
  return {{"id", b.id},
          {"name", b.name},
          {"dtype", std::string(comm::dtypeName(b.dtype))},
          {"global_shape", b.global_shape},
          {"local_shape", b.local_shape},
          {"bytes", b.bytes},
          {"role", std::string(roleName(b.role))},
          {"placement", placementJson(b.placement)},
          {"live", {b.live.first, b.live.last}},
          {"init", initJson(b.init)}};
}

json instructionJson(const Instruction& in) {
  json attrs = json::object();
  for (const AttrUse& use : in.info->attrs) {
    if (use.required || internal::hasAttr(use.id, in.attrs)) {
      attrs[std::string(attrName(use.id))] = internal::writeAttr(use.id, in.attrs);
    }
  }
  json out = {{"op", in.op},
              {"index", in.index},
              {"stream", std::string(streamName(in.info->stream))},
              {"operands", in.operands},
              {"results", in.results},
              {"attrs", std::move(attrs)}};
  if (in.start_s) out["start_s"] = *in.start_s;
  if (in.duration_s) out["duration_s"] = *in.duration_s;
  return out;
}

json programJson(const Program& program) {
  json blocks = json::array();
  for (const Block& block : program.blocks) {
    json instructions = json::array();
    for (const Instruction& in : block.instructions) instructions.push_back(instructionJson(in));
    blocks.push_back({{"name", block.name},
                      {"phase", std::string(phaseName(block.phase))},
                      {"instructions", std::move(instructions)}});
  }
  json schedule = json::array();
  for (const ScheduleEntry& entry : program.schedule) {
    json e = {{"block", entry.block}};
    if (entry.micro_batch >= 0) e["micro_batch"] = entry.micro_batch;
    schedule.push_back(std::move(e));
  }
  return {{"stage", program.stage}, {"blocks", std::move(blocks)}, {"schedule", std::move(schedule)}};
}

json topologyJson(const Topology& t) {
  auto link = [](const Link& l) {
    return json{{"class", l.link_class},
                {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                {"latency_s", l.latency_s}};
  };
  return {{"hosts", t.hosts},
          {"devices_per_host", t.devices_per_host},
          {"device",
           {{"name", t.device},
            {"peak_flops_bf16", t.peak_flops_bf16},
            {"peak_flops_fp32", t.peak_flops_fp32},
            {"memory_bytes", t.memory_bytes},
            {"memory_bandwidth_bytes_per_s", t.memory_bandwidth_bytes_per_s}}},
          {"links", {{"intra_host", link(t.intra_host)}, {"inter_host", link(t.inter_host)}}}};
}

json predictedJson(const Predicted& p) {
  json volume = json::array();
  for (const CommVolume& v : p.comm_volume) {
    volume.push_back({{"axes", v.axes}, {"kind", v.kind}, {"count", v.count}, {"bytes", v.bytes}});
  }
  json out = {{"step_time_s", p.step_time_s},
              {"model_flops", p.model_flops},
              {"compute_s", p.compute_s},
              {"comm_s", p.comm_s},
              {"exposed_comm_s", p.exposed_comm_s},
              {"optimizer_s", p.optimizer_s},
              {"compute_efficiency", p.compute_efficiency},
              {"peak_bytes", p.peak_bytes},
              {"peak_index", p.peak_index},
              {"breakdown", p.breakdown},
              {"comm_volume", std::move(volume)},
              {"comm_bytes_per_rank", p.comm_bytes_per_rank}};
  if (!p.machine_profile.empty()) out["machine_profile"] = p.machine_profile;
  return out;
}

json interfaceJson(const Interface& io) {
  json out = {{"ids", io.ids}, {"labels", io.labels}, {"loss_grad_seed", io.loss_grad_seed}, {"loss", io.loss}};
  if (io.positions >= 0) out["positions"] = io.positions;
  if (io.vocab > 0) out["vocab"] = io.vocab;
  return out;
}

}  // namespace

std::string writePlan(const Plan& plan) {
  json buffers = json::array();
  for (const Buffer& b : plan.buffers) buffers.push_back(bufferJson(b));
  json programs = json::array();
  for (const Program& program : plan.programs) programs.push_back(programJson(program));
  const json root = {{"format_version", kFormatVersion},
                     {"model", plan.model},
                     {"function", plan.function},
                     {"mesh", {{"shape", plan.mesh.shape()}, {"axes", plan.mesh.axisNames()}}},
                     {"strategies", plan.strategies},
                     {"topology", topologyJson(plan.topology)},
                     {"buffers", std::move(buffers)},
                     {"micro_batches", plan.micro_batches},
                     {"programs", std::move(programs)},
                     {"interface", interfaceJson(plan.interface)},
                     {"predicted", predictedJson(plan.predicted)}};
  return root.dump(2) + "\n";
}

absl::Status writePlanFile(const Plan& plan, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << writePlan(plan);
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace loom::plan
