// Writing plan.json (plan.h's writePlan): the inverse of the reader, field
// for field. The text is streamed, not built as a JSON tree first (a
// 1024-rank plan has 15 MB of it): two-space indent, object keys in sorted
// order, numbers in their shortest round-trip form, so equal plans give
// equal text and reading a written plan writes it again byte for byte.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "plan/attrs_codec.h"
#include "plan/plan.h"

namespace loom::plan {
namespace {

// A JSON text writer: open/close objects and arrays, keys, scalars.
class JsonOut {
 public:
  std::string take() { return std::move(out_); }

  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }
  // The next value is this object member's.
  void key(std::string_view name) {
    item();
    string(name);
    out_ += ": ";
    keyed_ = true;
  }
  // key(name) then value(v).
  template <typename T>
  void member(std::string_view name, const T& v) {
    key(name);
    value(v);
  }
  void value(int64_t v) { scalar(absl::StrCat(v)); }
  // Non-finite numbers have no JSON form; like nlohmann, they are null.
  void value(double v) {
    if (!std::isfinite(v)) return null();
    char text[32];
    const std::to_chars_result end = std::to_chars(text, text + sizeof(text), v);
    std::string number(text, end.ptr);
    // An integral double keeps a fraction, so every reader sees a float.
    if (number.find_first_of(".e") == std::string::npos) number += ".0";
    scalar(number);
  }
  // A C string would convert to bool before string_view; say which.
  void value(const char*) = delete;
  void value(std::string_view v) {
    item();
    string(v);
  }
  void value(bool v) { scalar(v ? "true" : "false"); }
  void null() { scalar("null"); }
  // An array of integers or strings.
  template <typename T>
  void list(const std::vector<T>& values) {
    beginArray();
    for (const T& v : values) value(v);
    endArray();
  }
  // A JSON value from the attribute codec.
  void raw(const nlohmann::json& v) {
    if (v.is_array()) {
      beginArray();
      for (const nlohmann::json& item : v) raw(item);
      endArray();
    } else if (v.is_string()) {
      value(std::string_view(v.get_ref<const std::string&>()));
    } else if (v.is_boolean()) {
      value(v.get<bool>());
    } else if (v.is_number_integer()) {
      value(v.get<int64_t>());
    } else if (v.is_number()) {
      value(v.get<double>());
    } else {
      null();
    }
  }

 private:
  // Before a value: the separator and indent, unless it follows its key.
  void item() {
    if (keyed_) {
      keyed_ = false;
      return;
    }
    if (!counts_.empty()) {
      if (counts_.back()++ > 0) out_ += ',';
      out_ += '\n';
      out_.append(2 * counts_.size(), ' ');
    }
  }
  void scalar(std::string_view text) {
    item();
    out_ += text;
  }
  void open(char bracket) {
    item();
    out_ += bracket;
    counts_.push_back(0);
  }
  void close(char bracket) {
    const bool empty = counts_.back() == 0;
    counts_.pop_back();
    if (!empty) {
      out_ += '\n';
      out_.append(2 * counts_.size(), ' ');
    }
    out_ += bracket;
  }
  void string(std::string_view s) {
    out_ += '"';
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
        out_ += escaped;
      } else {
        out_ += c;
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<int64_t> counts_;  // members written so far, per open scope
  bool keyed_ = false;
};

// An object whose members are written in sorted key order, whatever order
// the code names them in.
class SortedObject {
 public:
  explicit SortedObject(JsonOut& out) : out_(out) {}
  void add(std::string_view key, std::function<void()> write) {
    members_.emplace_back(key, std::move(write));
  }
  void write() {
    std::sort(members_.begin(), members_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    out_.beginObject();
    for (auto& [key, write] : members_) {
      out_.key(key);
      write();
    }
    out_.endObject();
  }

 private:
  JsonOut& out_;
  std::vector<std::pair<std::string_view, std::function<void()>>> members_;
};

// The shortest decimal that reads back as `value` (0.02, not the
// 0.0199999995529 a float widened to double prints as).
double shortest(float value) {
  char text[32];
  const std::to_chars_result end = std::to_chars(text, text + sizeof(text), value);
  return std::strtod(std::string(text, end.ptr).c_str(), nullptr);
}

void writeInit(JsonOut& out, const std::optional<InitSpec>& init) {
  if (!init) return out.null();
  const char* kind = init->kind == InitSpec::Kind::kNormal  ? "normal"
                     : init->kind == InitSpec::Kind::kZeros ? "zeros"
                                                            : "ones";
  out.beginObject();
  out.member("kind", std::string_view(kind));
  out.member("mean", shortest(init->mean));
  out.member("seed", static_cast<int64_t>(init->seed));
  out.member("std", shortest(init->std));
  out.member("stream", static_cast<int64_t>(init->stream_id));
  out.endObject();
}

void writePlacement(JsonOut& out, const Placement& placement) {
  out.beginArray();
  for (const AxisPlacement& axis : placement) out.value(std::string_view(axis.toString()));
  out.endArray();
}

void writeBuffer(JsonOut& out, const Buffer& b) {
  out.beginObject();
  out.member("bytes", b.bytes);
  out.member("dtype", comm::dtypeName(b.dtype));
  out.key("global_shape");
  out.list(b.global_shape);
  out.member("id", b.id);
  out.key("init");
  writeInit(out, b.init);
  out.key("live");
  out.list(std::vector<int64_t>{b.live.first, b.live.last});
  out.key("local_shape");
  out.list(b.local_shape);
  if (b.onHost()) out.member("memory", std::string_view(memorySpaceName(b.memory)));
  out.member("name", std::string_view(b.name));
  out.key("placement");
  writePlacement(out, b.placement);
  if (b.replica_of >= 0) out.member("replica_of", b.replica_of);
  out.member("role", std::string_view(roleName(b.role)));
  out.endObject();
}

void writeInstruction(JsonOut& out, const Instruction& in) {
  out.beginObject();
  out.key("attrs");
  SortedObject attrs(out);
  for (const AttrUse& use : in.info->attrs) {
    if (use.required || internal::hasAttr(use.id, in.attrs)) {
      attrs.add(attrName(use.id),
                [&out, &in, id = use.id] { out.raw(internal::writeAttr(id, in.attrs)); });
    }
  }
  attrs.write();
  if (in.duration_s) out.member("duration_s", *in.duration_s);
  out.member("index", in.index);
  if (in.micro_step != MicroStep::kEvery) {
    out.member("micro_step", std::string_view(microStepName(in.micro_step)));
  }
  out.member("op", std::string_view(in.op));
  out.key("operands");
  out.list(in.operands);
  if (in.recompute) out.member("recompute", true);
  out.key("results");
  out.list(in.results);
  if (!in.scope.empty()) out.member("scope", std::string_view(in.scope));
  if (in.start_s) out.member("start_s", *in.start_s);
  out.member("stream", std::string_view(streamName(in.info->stream)));
  out.endObject();
}

void writeProgram(JsonOut& out, const Program& program) {
  out.beginObject();
  out.key("blocks");
  out.beginArray();
  for (const Block& block : program.blocks) {
    out.beginObject();
    out.key("instructions");
    out.beginArray();
    for (const Instruction& in : block.instructions) writeInstruction(out, in);
    out.endArray();
    out.member("name", std::string_view(block.name));
    out.member("phase", std::string_view(phaseName(block.phase)));
    out.endObject();
  }
  out.endArray();
  out.key("schedule");
  out.beginArray();
  for (const ScheduleEntry& entry : program.schedule) {
    out.beginObject();
    out.member("block", std::string_view(entry.block));
    if (entry.micro_batch >= 0) out.member("micro_batch", entry.micro_batch);
    out.endObject();
  }
  out.endArray();
  out.member("stage", program.stage);
  out.endObject();
}

void writeLink(JsonOut& out, const Link& link) {
  out.beginObject();
  out.member("bandwidth_bytes_per_s", link.bandwidth_bytes_per_s);
  out.member("class", std::string_view(link.link_class));
  out.member("latency_s", link.latency_s);
  out.endObject();
}

void writeTopology(JsonOut& out, const Topology& t) {
  out.beginObject();
  out.key("device");
  out.beginObject();
  if (t.host_memory_bytes > 0) {
    out.member("host_memory_bandwidth_bytes_per_s", t.host_memory_bandwidth_bytes_per_s);
    out.member("host_memory_bytes", t.host_memory_bytes);
  }
  out.member("memory_bandwidth_bytes_per_s", t.memory_bandwidth_bytes_per_s);
  out.member("memory_bytes", t.memory_bytes);
  out.member("name", std::string_view(t.device));
  out.member("peak_flops_bf16", t.peak_flops_bf16);
  out.member("peak_flops_fp32", t.peak_flops_fp32);
  out.endObject();
  out.member("devices_per_host", t.devices_per_host);
  out.member("hosts", t.hosts);
  out.key("links");
  out.beginObject();
  if (t.host.bandwidth_bytes_per_s > 0) {
    out.key("host");
    writeLink(out, t.host);
  }
  out.key("inter_host");
  writeLink(out, t.inter_host);
  out.key("intra_host");
  writeLink(out, t.intra_host);
  out.endObject();
  out.endObject();
}

void writeBreakdown(JsonOut& out, const std::map<std::string, int64_t>& breakdown) {
  out.beginObject();
  for (const auto& [role, bytes] : breakdown) out.member(role, bytes);
  out.endObject();
}

void writeOffload(JsonOut& out, const OffloadPredicted& o) {
  out.beginObject();
  out.member("copy_s", o.copy_s);
  out.member("exposed_copy_s", o.exposed_copy_s);
  out.key("host_breakdown");
  writeBreakdown(out, o.host_breakdown);
  out.member("host_optimizer_s", o.host_optimizer_s);
  out.member("host_peak_bytes", o.host_peak_bytes);
  out.member("host_peak_index", o.host_peak_index);
  out.member("to_device_bytes", o.to_device_bytes);
  out.member("to_host_bytes", o.to_host_bytes);
  out.endObject();
}

void writePredicted(JsonOut& out, const Predicted& p) {
  out.beginObject();
  out.key("breakdown");
  writeBreakdown(out, p.breakdown);
  out.member("comm_bytes_per_rank", p.comm_bytes_per_rank);
  out.member("comm_s", p.comm_s);
  out.key("comm_volume");
  out.beginArray();
  for (const CommVolume& v : p.comm_volume) {
    out.beginObject();
    out.member("axes", std::string_view(v.axes));
    out.member("bytes", v.bytes);
    out.member("count", v.count);
    out.member("kind", std::string_view(v.kind));
    out.endObject();
  }
  out.endArray();
  if (p.bubble_s > 0) out.member("bubble_s", p.bubble_s);
  out.member("compute_efficiency", p.compute_efficiency);
  out.member("compute_s", p.compute_s);
  out.member("exposed_comm_s", p.exposed_comm_s);
  if (!p.machine_profile.empty())
    out.member("machine_profile", std::string_view(p.machine_profile));
  out.member("model_flops", p.model_flops);
  if (p.offload) {
    out.key("offload");
    writeOffload(out, *p.offload);
  }
  out.member("optimizer_s", p.optimizer_s);
  out.member("peak_bytes", p.peak_bytes);
  out.member("peak_index", p.peak_index);
  if (!p.stage_peak_bytes.empty()) {
    out.key("stage_peak_bytes");
    out.list(p.stage_peak_bytes);
  }
  out.member("step_time_s", p.step_time_s);
  out.endObject();
}

void writeInterface(JsonOut& out, const Interface& io) {
  out.beginObject();
  out.member("ids", io.ids);
  out.member("labels", io.labels);
  out.member("loss", io.loss);
  out.member("loss_grad_seed", io.loss_grad_seed);
  if (io.positions >= 0) out.member("positions", io.positions);
  if (io.vocab > 0) out.member("vocab", io.vocab);
  out.endObject();
}

}  // namespace

std::string writePlan(const Plan& plan) {
  JsonOut out;
  out.beginObject();
  out.key("buffers");
  out.beginArray();
  for (const Buffer& b : plan.buffers) writeBuffer(out, b);
  out.endArray();
  out.member("format_version", static_cast<int64_t>(kFormatVersion));
  out.member("function", std::string_view(plan.function));
  out.key("interface");
  writeInterface(out, plan.interface);
  out.key("mesh");
  out.beginObject();
  out.key("axes");
  out.list(plan.mesh.axisNames());
  out.key("shape");
  out.list(plan.mesh.shape());
  out.endObject();
  out.member("micro_batches", plan.micro_batches);
  out.member("model", std::string_view(plan.model));
  out.key("predicted");
  writePredicted(out, plan.predicted);
  out.key("programs");
  out.beginArray();
  for (const Program& program : plan.programs) writeProgram(out, program);
  out.endArray();
  out.key("strategies");
  out.list(plan.strategies);
  out.key("topology");
  writeTopology(out, plan.topology);
  out.endObject();
  return out.take() + "\n";
}

absl::Status writePlanFile(const Plan& plan, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << writePlan(plan);
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace loom::plan
