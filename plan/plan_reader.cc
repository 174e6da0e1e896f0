// Reading plan.json (plan.h's loadPlan and parsePlan): every field is read
// into its typed home here, with an error that names the file, the JSON
// path and what the field must be; checkPlan (plan_check.cc) then checks
// what relates one field to another.
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "plan/attrs_codec.h"
#include "plan/plan.h"

namespace loom::plan {
namespace {

using json = nlohmann::json;

enum class Kind { kObject, kArray, kString, kInteger, kNumber, kBoolean };

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
    case Kind::kString:
      return "a string";
    case Kind::kInteger:
      return "an integer";
    case Kind::kNumber:
      return "a number";
    case Kind::kBoolean:
      return "true or false";
  }
  return "?";
}

bool hasKind(const json& value, Kind kind) {
  switch (kind) {
    case Kind::kObject:
      return value.is_object();
    case Kind::kArray:
      return value.is_array();
    case Kind::kString:
      return value.is_string();
    case Kind::kInteger:
      return value.is_number_integer();
    case Kind::kNumber:
      return value.is_number();
    case Kind::kBoolean:
      return value.is_boolean();
  }
  return false;
}

// Typed field access with errors located by JSON path.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  absl::Status error(absl::string_view path, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", path, ": ", what));
  }

  // object[key], which must exist and be of `kind`.
  absl::StatusOr<const json*> need(const json& object, absl::string_view path, const char* key,
                                   Kind kind) const {
    if (!object.is_object()) return error(path, "must be an object");
    auto it = object.find(key);
    if (it == object.end()) {
      return error(absl::StrCat(path, ".", key),
                   "is missing; re-plan with this build's //tools:plan (docs/plan_json.md)");
    }
    if (!hasKind(*it, kind)) {
      std::string got = it->dump();
      if (got.size() > 60) got = got.substr(0, 57) + "...";
      return error(absl::StrCat(path, ".", key),
                   absl::StrCat("must be ", kindName(kind), ", got ", got));
    }
    return &*it;
  }

  template <typename T>
  absl::Status get(const json& object, absl::string_view path, const char* key, T& out) const {
    absl::StatusOr<const json*> value = need(object, path, key, kindOf<T>());
    if (!value.ok()) return value.status();
    out = (*value)->get<T>();
    return absl::OkStatus();
  }

  // The same for a field that may be absent (then `out` is left as it is).
  template <typename T>
  absl::Status getOptional(const json& object, absl::string_view path, const char* key,
                           T& out) const {
    if (!object.is_object() || !object.contains(key) || object[key].is_null())
      return absl::OkStatus();
    return get(object, path, key, out);
  }

  // An array of integers or of strings.
  template <typename T>
  absl::Status getList(const json& object, absl::string_view path, const char* key,
                       std::vector<T>& out) const {
    absl::StatusOr<const json*> list = need(object, path, key, Kind::kArray);
    if (!list.ok()) return list.status();
    out.clear();
    for (size_t i = 0; i < (*list)->size(); ++i) {
      const json& item = (**list)[i];
      if (!hasKind(item, kindOf<T>())) {
        return error(absl::StrCat(path, ".", key, "[", i, "]"),
                     absl::StrCat("must be ", kindName(kindOf<T>())));
      }
      out.push_back(item.get<T>());
    }
    return absl::OkStatus();
  }

 private:
  template <typename T>
  static constexpr Kind kindOf() {
    if constexpr (std::is_same_v<T, std::string>)
      return Kind::kString;
    else if constexpr (std::is_same_v<T, double>)
      return Kind::kNumber;
    else if constexpr (std::is_same_v<T, bool>)
      return Kind::kBoolean;
    else
      return Kind::kInteger;
  }

  std::string source_;
};

#define LOOM_RETURN_IF_ERROR(expr)                     \
  do {                                                 \
    if (absl::Status s_ = (expr); !s_.ok()) return s_; \
  } while (0)

absl::Status readMesh(const Reader& r, const json& root, Plan& plan) {
  absl::StatusOr<const json*> meshJson = r.need(root, "$", "mesh", Kind::kObject);
  if (!meshJson.ok()) return meshJson.status();
  std::vector<int64_t> shape;
  std::vector<std::string> axes;
  LOOM_RETURN_IF_ERROR(r.getList(**meshJson, "$.mesh", "shape", shape));
  LOOM_RETURN_IF_ERROR(r.getList(**meshJson, "$.mesh", "axes", axes));
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::create(shape, axes);
  if (!mesh.ok()) return r.error("$.mesh", mesh.status().message());
  plan.mesh = *std::move(mesh);
  return r.getList(root, "$", "strategies", plan.strategies);
}

absl::Status readTopology(const Reader& r, const json& root, Topology& t) {
  absl::StatusOr<const json*> topology = r.need(root, "$", "topology", Kind::kObject);
  if (!topology.ok()) return topology.status();
  const json& tj = **topology;
  LOOM_RETURN_IF_ERROR(r.get(tj, "$.topology", "hosts", t.hosts));
  LOOM_RETURN_IF_ERROR(r.get(tj, "$.topology", "devices_per_host", t.devices_per_host));
  absl::StatusOr<const json*> device = r.need(tj, "$.topology", "device", Kind::kObject);
  if (!device.ok()) return device.status();
  const std::string d = "$.topology.device";
  LOOM_RETURN_IF_ERROR(r.get(**device, d, "name", t.device));
  LOOM_RETURN_IF_ERROR(r.get(**device, d, "peak_flops_bf16", t.peak_flops_bf16));
  LOOM_RETURN_IF_ERROR(r.get(**device, d, "peak_flops_fp32", t.peak_flops_fp32));
  LOOM_RETURN_IF_ERROR(r.get(**device, d, "memory_bytes", t.memory_bytes));
  LOOM_RETURN_IF_ERROR(
      r.get(**device, d, "memory_bandwidth_bytes_per_s", t.memory_bandwidth_bytes_per_s));
  // The host's figures and link: in every plan made since offload, needed
  // by one that holds host buffers (checkPlan).
  LOOM_RETURN_IF_ERROR(r.getOptional(**device, d, "host_memory_bytes", t.host_memory_bytes));
  LOOM_RETURN_IF_ERROR(r.getOptional(**device, d, "host_memory_bandwidth_bytes_per_s",
                                     t.host_memory_bandwidth_bytes_per_s));
  absl::StatusOr<const json*> links = r.need(tj, "$.topology", "links", Kind::kObject);
  if (!links.ok()) return links.status();
  for (auto [key, link] : {std::pair{"intra_host", &t.intra_host},
                           std::pair{"inter_host", &t.inter_host}, std::pair{"host", &t.host}}) {
    if (link == &t.host && !(*links)->contains(key)) continue;
    absl::StatusOr<const json*> lj = r.need(**links, "$.topology.links", key, Kind::kObject);
    if (!lj.ok()) return lj.status();
    const std::string path = absl::StrCat("$.topology.links.", key);
    LOOM_RETURN_IF_ERROR(r.get(**lj, path, "class", link->link_class));
    LOOM_RETURN_IF_ERROR(r.get(**lj, path, "bandwidth_bytes_per_s", link->bandwidth_bytes_per_s));
    LOOM_RETURN_IF_ERROR(r.get(**lj, path, "latency_s", link->latency_s));
  }
  return absl::OkStatus();
}

absl::Status readInit(const Reader& r, const json& b, const std::string& path, Buffer& buffer) {
  if (!b.contains("init") || b["init"].is_null()) return absl::OkStatus();
  const std::string ipath = path + ".init";
  absl::StatusOr<const json*> init = r.need(b, path, "init", Kind::kObject);
  if (!init.ok()) return init.status();
  InitSpec spec;
  std::string kind;
  LOOM_RETURN_IF_ERROR(r.get(**init, ipath, "kind", kind));
  if (kind == "normal")
    spec.kind = InitSpec::Kind::kNormal;
  else if (kind == "zeros")
    spec.kind = InitSpec::Kind::kZeros;
  else if (kind == "ones")
    spec.kind = InitSpec::Kind::kOnes;
  else
    return r.error(ipath + ".kind",
                   absl::StrCat("is '", kind, "'; expected normal, zeros or ones"));
  double mean = 0, stddev = 0;
  int64_t seed = 0, stream = 0;
  LOOM_RETURN_IF_ERROR(r.get(**init, ipath, "mean", mean));
  LOOM_RETURN_IF_ERROR(r.get(**init, ipath, "std", stddev));
  LOOM_RETURN_IF_ERROR(r.get(**init, ipath, "seed", seed));
  LOOM_RETURN_IF_ERROR(r.get(**init, ipath, "stream", stream));
  spec.mean = static_cast<float>(mean);
  spec.std = static_cast<float>(stddev);
  spec.seed = static_cast<uint64_t>(seed);
  spec.stream_id = static_cast<uint64_t>(stream);
  buffer.init = spec;
  return absl::OkStatus();
}

absl::Status readBuffer(const Reader& r, const json& b, size_t i, Buffer& buffer) {
  const std::string path = absl::StrCat("$.buffers[", i, "]");
  LOOM_RETURN_IF_ERROR(r.get(b, path, "id", buffer.id));
  LOOM_RETURN_IF_ERROR(r.get(b, path, "name", buffer.name));
  std::string text;
  LOOM_RETURN_IF_ERROR(r.get(b, path, "dtype", text));
  absl::StatusOr<comm::DType> dtype = comm::dtypeFromName(text);
  if (!dtype.ok()) return r.error(path + ".dtype", dtype.status().message());
  buffer.dtype = *dtype;
  LOOM_RETURN_IF_ERROR(r.getList(b, path, "global_shape", buffer.global_shape));
  LOOM_RETURN_IF_ERROR(r.getList(b, path, "local_shape", buffer.local_shape));
  LOOM_RETURN_IF_ERROR(r.get(b, path, "bytes", buffer.bytes));
  LOOM_RETURN_IF_ERROR(r.get(b, path, "role", text));
  absl::StatusOr<BufferRole> role = roleFromName(text);
  if (!role.ok()) return r.error(path + ".role", role.status().message());
  buffer.role = *role;
  text = memorySpaceName(MemorySpace::kDevice);
  LOOM_RETURN_IF_ERROR(r.getOptional(b, path, "memory", text));
  absl::StatusOr<MemorySpace> memory = memorySpaceFromName(text);
  if (!memory.ok()) return r.error(path + ".memory", memory.status().message());
  buffer.memory = *memory;
  std::vector<std::string> placement;
  LOOM_RETURN_IF_ERROR(r.getList(b, path, "placement", placement));
  for (size_t a = 0; a < placement.size(); ++a) {
    absl::StatusOr<AxisPlacement> axis = AxisPlacement::parse(placement[a]);
    if (!axis.ok())
      return r.error(absl::StrCat(path, ".placement[", a, "]"), axis.status().message());
    buffer.placement.push_back(*axis);
  }
  std::vector<int64_t> live;
  LOOM_RETURN_IF_ERROR(r.getList(b, path, "live", live));
  if (live.size() != 2) return r.error(path + ".live", "must be [first, last]");
  buffer.live = {live[0], live[1]};
  LOOM_RETURN_IF_ERROR(r.getOptional(b, path, "replica_of", buffer.replica_of));
  return readInit(r, b, path, buffer);
}

// Every key must be an attribute of the op; which ones it must have is
// checkPlan's (plan_check.cc), for read and built plans alike.
absl::Status readAttrs(const Reader& r, const json& attrs, const std::string& path,
                       Instruction& in) {
  for (const auto& [key, value] : attrs.items()) {
    const std::string where = absl::StrCat(path, ".attrs.", key);
    std::optional<AttrId> id = internal::attrFromName(key);
    if (!id || in.info->findAttr(*id) == nullptr) {
      return r.error(where, absl::StrCat("is not an attribute of ", in.op,
                                         "; re-plan with this build's //tools:plan"));
    }
    if (absl::Status s = internal::readAttr(*id, value, in.attrs); !s.ok()) {
      return r.error(where, s.message());
    }
  }
  return absl::OkStatus();
}

absl::Status readInstruction(const Reader& r, const json& j, const std::string& path,
                             Instruction& in) {
  LOOM_RETURN_IF_ERROR(r.get(j, path, "op", in.op));
  in.info = findOp(in.op);
  if (in.info == nullptr) {
    return r.error(path + ".op",
                   absl::StrCat("'", in.op, "' is not an op of this plan format (known: ",
                                std::string(opNames()), ")"));
  }
  LOOM_RETURN_IF_ERROR(r.getOptional(j, path, "index", in.index));
  LOOM_RETURN_IF_ERROR(r.getOptional(j, path, "scope", in.scope));
  LOOM_RETURN_IF_ERROR(r.getOptional(j, path, "recompute", in.recompute));
  std::string microStep = microStepName(MicroStep::kEvery);
  LOOM_RETURN_IF_ERROR(r.getOptional(j, path, "micro_step", microStep));
  absl::StatusOr<MicroStep> when = microStepFromName(microStep);
  if (!when.ok()) return r.error(path + ".micro_step", when.status().message());
  in.micro_step = *when;
  std::string stream;
  LOOM_RETURN_IF_ERROR(r.get(j, path, "stream", stream));
  if (stream != streamName(in.info->stream)) {
    return r.error(path + ".stream", absl::StrCat("is '", stream, "'; ", in.op, " runs on the ",
                                                  streamName(in.info->stream), " stream"));
  }
  LOOM_RETURN_IF_ERROR(r.getList(j, path, "operands", in.operands));
  LOOM_RETURN_IF_ERROR(r.getList(j, path, "results", in.results));
  absl::StatusOr<const json*> attrs = r.need(j, path, "attrs", Kind::kObject);
  if (!attrs.ok()) return attrs.status();
  LOOM_RETURN_IF_ERROR(readAttrs(r, **attrs, path, in));
  double start = 0, duration = 0;
  if (j.contains("start_s") || j.contains("duration_s")) {
    LOOM_RETURN_IF_ERROR(r.get(j, path, "start_s", start));
    LOOM_RETURN_IF_ERROR(r.get(j, path, "duration_s", duration));
    in.start_s = start;
    in.duration_s = duration;
  }
  return absl::OkStatus();
}

absl::StatusOr<Phase> phaseFromName(std::string_view name) {
  for (Phase p : {Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    if (phaseName(p) == name) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("is '", std::string(name), "'; expected forward, backward or optimizer"));
}

absl::Status readBlock(const Reader& r, const json& j, const std::string& path, Block& block) {
  LOOM_RETURN_IF_ERROR(r.get(j, path, "name", block.name));
  std::string phase;
  LOOM_RETURN_IF_ERROR(r.get(j, path, "phase", phase));
  absl::StatusOr<Phase> parsed = phaseFromName(phase);
  if (!parsed.ok()) return r.error(path + ".phase", parsed.status().message());
  block.phase = *parsed;
  absl::StatusOr<const json*> list = r.need(j, path, "instructions", Kind::kArray);
  if (!list.ok()) return list.status();
  for (size_t i = 0; i < (*list)->size(); ++i) {
    Instruction in;
    in.phase = block.phase;
    in.block = block.name;
    in.position = static_cast<int64_t>(i);
    LOOM_RETURN_IF_ERROR(
        readInstruction(r, (**list)[i], absl::StrCat(path, ".instructions[", i, "]"), in));
    block.instructions.push_back(std::move(in));
  }
  return absl::OkStatus();
}

absl::Status readProgram(const Reader& r, const json& j, const std::string& path,
                         Program& program) {
  LOOM_RETURN_IF_ERROR(r.get(j, path, "stage", program.stage));
  absl::StatusOr<const json*> blocks = r.need(j, path, "blocks", Kind::kArray);
  if (!blocks.ok()) return blocks.status();
  for (size_t b = 0; b < (*blocks)->size(); ++b) {
    Block block;
    LOOM_RETURN_IF_ERROR(
        readBlock(r, (**blocks)[b], absl::StrCat(path, ".blocks[", b, "]"), block));
    program.blocks.push_back(std::move(block));
  }
  absl::StatusOr<const json*> schedule = r.need(j, path, "schedule", Kind::kArray);
  if (!schedule.ok()) return schedule.status();
  for (size_t s = 0; s < (*schedule)->size(); ++s) {
    const std::string spath = absl::StrCat(path, ".schedule[", s, "]");
    ScheduleEntry entry;
    LOOM_RETURN_IF_ERROR(r.get((**schedule)[s], spath, "block", entry.block));
    LOOM_RETURN_IF_ERROR(r.getOptional((**schedule)[s], spath, "micro_batch", entry.micro_batch));
    program.schedule.push_back(std::move(entry));
  }
  program.assignOrder();
  return absl::OkStatus();
}

absl::Status readInterface(const Reader& r, const json& root, Interface& io) {
  absl::StatusOr<const json*> j = r.need(root, "$", "interface", Kind::kObject);
  if (!j.ok()) return j.status();
  LOOM_RETURN_IF_ERROR(r.get(**j, "$.interface", "ids", io.ids));
  LOOM_RETURN_IF_ERROR(r.get(**j, "$.interface", "labels", io.labels));
  LOOM_RETURN_IF_ERROR(r.get(**j, "$.interface", "loss_grad_seed", io.loss_grad_seed));
  LOOM_RETURN_IF_ERROR(r.get(**j, "$.interface", "loss", io.loss));
  LOOM_RETURN_IF_ERROR(r.getOptional(**j, "$.interface", "positions", io.positions));
  return r.getOptional(**j, "$.interface", "vocab", io.vocab);
}

absl::Status readBreakdown(const Reader& r, const json& object, const std::string& path,
                           const char* key, std::map<std::string, int64_t>& out) {
  absl::StatusOr<const json*> breakdown = r.need(object, path, key, Kind::kObject);
  if (!breakdown.ok()) return breakdown.status();
  for (const auto& [role, bytes] : (*breakdown)->items()) {
    if (!bytes.is_number_integer())
      return r.error(absl::StrCat(path, ".", key, ".", role), "must be an integer");
    out[role] = bytes.get<int64_t>();
  }
  return absl::OkStatus();
}

// predicted.offload, present when the plan holds host buffers.
absl::Status readOffload(const Reader& r, const json& predicted, Predicted& p) {
  if (!predicted.contains("offload")) return absl::OkStatus();
  absl::StatusOr<const json*> oj = r.need(predicted, "$.predicted", "offload", Kind::kObject);
  if (!oj.ok()) return oj.status();
  const std::string path = "$.predicted.offload";
  OffloadPredicted& o = p.offload.emplace();
  for (auto [key, out] : {std::pair{"copy_s", &o.copy_s},
                          std::pair{"exposed_copy_s", &o.exposed_copy_s},
                          std::pair{"host_optimizer_s", &o.host_optimizer_s}}) {
    LOOM_RETURN_IF_ERROR(r.get(**oj, path, key, *out));
  }
  for (auto [key, out] : {std::pair{"host_peak_bytes", &o.host_peak_bytes},
                          std::pair{"host_peak_index", &o.host_peak_index},
                          std::pair{"to_device_bytes", &o.to_device_bytes},
                          std::pair{"to_host_bytes", &o.to_host_bytes}}) {
    LOOM_RETURN_IF_ERROR(r.get(**oj, path, key, *out));
  }
  return readBreakdown(r, **oj, path, "host_breakdown", o.host_breakdown);
}

absl::Status readPredicted(const Reader& r, const json& root, Predicted& p) {
  absl::StatusOr<const json*> pj = r.need(root, "$", "predicted", Kind::kObject);
  if (!pj.ok()) return pj.status();
  const json& j = **pj;
  const std::string path = "$.predicted";
  for (auto [key, out] :
       {std::pair{"step_time_s", &p.step_time_s}, std::pair{"model_flops", &p.model_flops},
        std::pair{"compute_s", &p.compute_s}, std::pair{"comm_s", &p.comm_s},
        std::pair{"exposed_comm_s", &p.exposed_comm_s}, std::pair{"optimizer_s", &p.optimizer_s},
        std::pair{"compute_efficiency", &p.compute_efficiency}}) {
    LOOM_RETURN_IF_ERROR(r.get(j, path, key, *out));
  }
  LOOM_RETURN_IF_ERROR(r.get(j, path, "peak_bytes", p.peak_bytes));
  LOOM_RETURN_IF_ERROR(r.get(j, path, "peak_index", p.peak_index));
  LOOM_RETURN_IF_ERROR(r.get(j, path, "comm_bytes_per_rank", p.comm_bytes_per_rank));
  LOOM_RETURN_IF_ERROR(r.getOptional(j, path, "machine_profile", p.machine_profile));
  LOOM_RETURN_IF_ERROR(r.getOptional(j, path, "bubble_s", p.bubble_s));
  if (j.contains("stage_peak_bytes")) {
    LOOM_RETURN_IF_ERROR(r.getList(j, path, "stage_peak_bytes", p.stage_peak_bytes));
  }
  LOOM_RETURN_IF_ERROR(readBreakdown(r, j, path, "breakdown", p.breakdown));
  LOOM_RETURN_IF_ERROR(readOffload(r, j, p));
  absl::StatusOr<const json*> volume = r.need(j, path, "comm_volume", Kind::kArray);
  if (!volume.ok()) return volume.status();
  for (size_t i = 0; i < (*volume)->size(); ++i) {
    const std::string vpath = absl::StrCat(path, ".comm_volume[", i, "]");
    CommVolume v;
    LOOM_RETURN_IF_ERROR(r.get((**volume)[i], vpath, "axes", v.axes));
    LOOM_RETURN_IF_ERROR(r.get((**volume)[i], vpath, "kind", v.kind));
    LOOM_RETURN_IF_ERROR(r.get((**volume)[i], vpath, "count", v.count));
    LOOM_RETURN_IF_ERROR(r.get((**volume)[i], vpath, "bytes", v.bytes));
    p.comm_volume.push_back(std::move(v));
  }
  return absl::OkStatus();
}

absl::Status readVersion(const Reader& r, const json& root) {
  if (!root.is_object()) return r.error("$", "must be a JSON object");
  int64_t version = 0;
  LOOM_RETURN_IF_ERROR(r.get(root, "$", "format_version", version));
  if (version != kFormatVersion) {
    return r.error("$.format_version",
                   absl::StrCat("is ", version, "; this build reads version ", kFormatVersion,
                                ". Re-plan the model with this build's planner: bazel run "
                                "//tools:plan -- --model=... --mesh=... --out=DIR"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> readPlan(const Reader& r, const json& root, std::string_view source) {
  LOOM_RETURN_IF_ERROR(readVersion(r, root));
  Plan plan;
  plan.source = std::string(source);
  LOOM_RETURN_IF_ERROR(r.get(root, "$", "model", plan.model));
  LOOM_RETURN_IF_ERROR(r.get(root, "$", "function", plan.function));
  LOOM_RETURN_IF_ERROR(readMesh(r, root, plan));
  LOOM_RETURN_IF_ERROR(readTopology(r, root, plan.topology));
  absl::StatusOr<const json*> buffers = r.need(root, "$", "buffers", Kind::kArray);
  if (!buffers.ok()) return buffers.status();
  plan.buffers.resize((*buffers)->size());
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    LOOM_RETURN_IF_ERROR(readBuffer(r, (**buffers)[i], i, plan.buffers[i]));
  }
  LOOM_RETURN_IF_ERROR(r.get(root, "$", "micro_batches", plan.micro_batches));
  absl::StatusOr<const json*> programs = r.need(root, "$", "programs", Kind::kArray);
  if (!programs.ok()) return programs.status();
  plan.programs.resize((*programs)->size());
  for (size_t p = 0; p < plan.programs.size(); ++p) {
    LOOM_RETURN_IF_ERROR(
        readProgram(r, (**programs)[p], absl::StrCat("$.programs[", p, "]"), plan.programs[p]));
  }
  LOOM_RETURN_IF_ERROR(readInterface(r, root, plan.interface));
  LOOM_RETURN_IF_ERROR(readPredicted(r, root, plan.predicted));
  LOOM_RETURN_IF_ERROR(checkPlan(plan));
  return plan;
}

#undef LOOM_RETURN_IF_ERROR

}  // namespace

absl::StatusOr<Plan> parsePlan(std::string_view text, std::string_view source) {
  const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source),
                     ": not valid JSON; write a plan with: bazel run //tools:plan -- --out=DIR"));
  }
  return readPlan(Reader(source), root, source);
}

absl::StatusOr<Plan> loadPlan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "cannot open plan '", path, "'; write one with: bazel run //tools:plan -- --out=DIR"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return parsePlan(text.str(), path);
}

}  // namespace loom::plan
