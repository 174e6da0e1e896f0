// Parsing and checking of plan.json; every error names the file and the
// JSON path of the field at fault.
#include "runtime/plan/plan.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/shard_math.h"
#include "runtime/plan/op_table.h"

namespace loom::runtime {
namespace {

using json = nlohmann::json;

std::string shapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  absl::Status error(const std::string& path, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", path, ": ", what));
  }

  absl::StatusOr<const json*> field(const json& object, const std::string& path,
                                    const char* key, json::value_t type) const {
    if (!object.is_object()) return error(path, "expected an object");
    auto it = object.find(key);
    if (it == object.end()) {
      return error(absl::StrCat(path, ".", key),
                   "missing; re-export the plan with this runtime's //tools:plan");
    }
    const bool ok = type == json::value_t::number_integer
                        ? it->is_number_integer()
                        : type == json::value_t::number_float ? it->is_number()
                                                              : it->type() == type;
    if (!ok) {
      return error(absl::StrCat(path, ".", key),
                   absl::StrCat("has the wrong type (", it->type_name(), ")"));
    }
    return &*it;
  }

  absl::StatusOr<std::vector<int64_t>> ints(const json& value, const std::string& path) const {
    if (!value.is_array()) return error(path, "expected an array of integers");
    std::vector<int64_t> out;
    for (size_t i = 0; i < value.size(); ++i) {
      if (!value[i].is_number_integer()) {
        return error(absl::StrCat(path, "[", i, "]"), "expected an integer");
      }
      out.push_back(value[i].get<int64_t>());
    }
    return out;
  }

 private:
  std::string source_;
};

absl::StatusOr<AxisPlacement> parseAxisPlacement(const std::string& text) {
  AxisPlacement p;
  if (text == "replicate") return p;
  auto inner = [&](std::string_view prefix) -> std::optional<std::string> {
    if (text.rfind(prefix, 0) != 0 || text.back() != ')') return std::nullopt;
    return text.substr(prefix.size(), text.size() - prefix.size() - 1);
  };
  if (std::optional<std::string> body = inner("shard(")) {
    p.kind = AxisPlacement::Kind::kShard;
    std::string digits = *body;
    if (auto comma = digits.find(','); comma != std::string::npos) {
      if (digits.substr(comma + 1) != "padded") {
        return absl::InvalidArgumentError(absl::StrCat("bad placement '", text, "'"));
      }
      p.padded = true;
      digits = digits.substr(0, comma);
    }
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad placement '", text, "'"));
    }
    p.dim = std::stoll(digits);
    return p;
  }
  if (std::optional<std::string> body = inner("partial(")) {
    if (*body != "sum" && *body != "avg" && *body != "max" && *body != "min") {
      return absl::InvalidArgumentError(absl::StrCat("bad placement '", text, "'"));
    }
    p.kind = AxisPlacement::Kind::kPartial;
    p.reduction = *body;
    return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bad placement '", text,
                   "' (expected replicate, shard(D), shard(D,padded) or partial(R))"));
}

// The operand and result counts the op table allows for `info`.
absl::Status checkArity(const OpInfo& info, const Instruction& instr, const std::string& path,
                        const Parser& p) {
  // "1 result", "2 operands", "1 or more operands", "4 to 5 operands".
  auto range = [](int low, int high, const char* noun) {
    const std::string count = high < 0    ? absl::StrCat(low, " or more")
                              : low == high ? absl::StrCat(low)
                                            : absl::StrCat(low, " to ", high);
    return absl::StrCat(count, " ", noun, low == 1 && high == 1 ? "" : "s");
  };
  auto count = [](size_t n, const char* noun) {
    return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
  };
  auto fits = [](size_t n, int low, int high) {
    return static_cast<int>(n) >= low && (high < 0 || static_cast<int>(n) <= high);
  };
  if (!fits(instr.operands.size(), info.min_operands, info.max_operands) ||
      !fits(instr.results.size(), info.min_results, info.max_results)) {
    return p.error(path, absl::StrCat(
        instr.op, " takes ", range(info.min_operands, info.max_operands, "operand"), " and ",
        range(info.min_results, info.max_results, "result"), "; this one has ",
        count(instr.operands.size(), "operand"), " and ", count(instr.results.size(), "result"),
        " (re-export the plan with this runtime's //tools:plan)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BufferRole> parseRole(const std::string& text) {
  for (BufferRole role : {BufferRole::kParam, BufferRole::kGrad, BufferRole::kOptimizerState,
                          BufferRole::kActivation, BufferRole::kGathered}) {
    if (bufferRoleName(role) == text) return role;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown role '", text, "'"));
}

}  // namespace

std::string bufferRoleName(BufferRole role) {
  switch (role) {
    case BufferRole::kParam: return "param";
    case BufferRole::kGrad: return "grad";
    case BufferRole::kOptimizerState: return "optimizer_state";
    case BufferRole::kActivation: return "activation";
    case BufferRole::kGathered: return "gathered";
  }
  return "?";
}

std::string phaseName(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
  }
  return "?";
}

std::string AxisPlacement::toString() const {
  switch (kind) {
    case Kind::kReplicate: return "replicate";
    case Kind::kShard: return absl::StrCat("shard(", dim, padded ? ",padded" : "", ")");
    case Kind::kPartial: return absl::StrCat("partial(", reduction, ")");
  }
  return "?";
}

int64_t BufferSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : local_shape) n *= d;
  return n;
}

std::string Instruction::where() const {
  return absl::StrCat("phases.", phaseName(phase), "[", position, "] (", op, ")");
}

mesh::DeviceMesh singleRankMesh() { return *mesh::DeviceMesh::create({1}, {"world"}); }

absl::StatusOr<ShardBox> shardBoxOf(const BufferSpec& buffer, const mesh::DeviceMesh& mesh,
                                    const std::vector<int64_t>& coords) {
  ShardBox box;
  const size_t rank = buffer.global_shape.size();
  box.offsets.assign(rank, 0);
  box.valid = buffer.global_shape;
  for (size_t d = 0; d < rank; ++d) {
    int64_t ways = 1;
    int64_t index = 0;
    for (size_t a = 0; a < buffer.placement.size(); ++a) {
      const AxisPlacement& p = buffer.placement[a];
      if (p.kind != AxisPlacement::Kind::kShard || p.dim != static_cast<int64_t>(d)) continue;
      index = index * mesh.shape()[a] + coords[a];
      ways *= mesh.shape()[a];
    }
    if (ways == 1) continue;
    absl::StatusOr<mesh::ShardExtent> extent = mesh::shardExtent(buffer.global_shape[d], ways, index);
    if (!extent.ok()) return extent.status();
    box.offsets[d] = extent->begin;
    box.valid[d] = extent->valid;
  }
  return box;
}

absl::StatusOr<Plan> parsePlan(const json& root, std::string_view source) {
  Parser p(source);
  Plan plan;
  plan.source = std::string(source);
  if (!root.is_object()) return p.error("$", "expected a JSON object");

  absl::StatusOr<const json*> version = p.field(root, "$", "format_version", json::value_t::number_integer);
  if (!version.ok()) return version.status();
  if ((*version)->get<int64_t>() != kPlanFormatVersion) {
    return p.error("$.format_version",
                   absl::StrCat("is ", (*version)->get<int64_t>(), "; this runtime reads version ",
                                kPlanFormatVersion, ": re-plan with the matching //tools:plan"));
  }
  for (auto [key, out] : {std::pair{"model", &plan.model}, std::pair{"function", &plan.function}}) {
    absl::StatusOr<const json*> text = p.field(root, "$", key, json::value_t::string);
    if (!text.ok()) return text.status();
    *out = (*text)->get<std::string>();
  }

  // Mesh and strategies.
  absl::StatusOr<const json*> meshJson = p.field(root, "$", "mesh", json::value_t::object);
  if (!meshJson.ok()) return meshJson.status();
  absl::StatusOr<const json*> shapeJson = p.field(**meshJson, "$.mesh", "shape", json::value_t::array);
  if (!shapeJson.ok()) return shapeJson.status();
  absl::StatusOr<std::vector<int64_t>> meshShape = p.ints(**shapeJson, "$.mesh.shape");
  if (!meshShape.ok()) return meshShape.status();
  absl::StatusOr<const json*> axesJson = p.field(**meshJson, "$.mesh", "axes", json::value_t::array);
  if (!axesJson.ok()) return axesJson.status();
  std::vector<std::string> axes;
  for (const json& axis : **axesJson) {
    if (!axis.is_string()) return p.error("$.mesh.axes", "expected strings");
    axes.push_back(axis.get<std::string>());
  }
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::create(*meshShape, axes);
  if (!mesh.ok()) return p.error("$.mesh", std::string(mesh.status().message()));
  plan.mesh = *std::move(mesh);
  absl::StatusOr<const json*> strategies = p.field(root, "$", "strategies", json::value_t::array);
  if (!strategies.ok()) return strategies.status();
  for (const json& s : **strategies) {
    if (!s.is_string()) return p.error("$.strategies", "expected strings");
    plan.strategies.push_back(s.get<std::string>());
  }
  if (plan.strategies.size() != axes.size()) {
    return p.error("$.strategies", absl::StrCat("has ", plan.strategies.size(),
                                                " entries for a mesh of ", axes.size(), " axes"));
  }

  // Buffers.
  absl::StatusOr<const json*> buffers = p.field(root, "$", "buffers", json::value_t::array);
  if (!buffers.ok()) return buffers.status();
  std::vector<bool> onEntry;
  for (size_t i = 0; i < (*buffers)->size(); ++i) {
    const json& b = (**buffers)[i];
    const std::string path = absl::StrCat("$.buffers[", i, "]");
    BufferSpec spec;
    absl::StatusOr<const json*> id = p.field(b, path, "id", json::value_t::number_integer);
    if (!id.ok()) return id.status();
    spec.id = (*id)->get<int64_t>();
    if (spec.id != static_cast<int64_t>(i)) {
      return p.error(path + ".id", absl::StrCat("is ", spec.id, "; ids must equal the index ", i));
    }
    absl::StatusOr<const json*> name = p.field(b, path, "name", json::value_t::string);
    if (!name.ok()) return name.status();
    spec.name = (*name)->get<std::string>();
    absl::StatusOr<const json*> dtype = p.field(b, path, "dtype", json::value_t::string);
    if (!dtype.ok()) return dtype.status();
    absl::StatusOr<comm::DType> parsedType = comm::dtypeFromName((*dtype)->get<std::string>());
    if (!parsedType.ok()) return p.error(path + ".dtype", std::string(parsedType.status().message()));
    spec.dtype = *parsedType;
    for (auto [key, out] : {std::pair{"global_shape", &spec.global_shape},
                            std::pair{"local_shape", &spec.local_shape}}) {
      absl::StatusOr<const json*> shape = p.field(b, path, key, json::value_t::array);
      if (!shape.ok()) return shape.status();
      absl::StatusOr<std::vector<int64_t>> dims = p.ints(**shape, absl::StrCat(path, ".", key));
      if (!dims.ok()) return dims.status();
      for (int64_t d : *dims) {
        if (d < 0) return p.error(absl::StrCat(path, ".", key), "has a negative dim");
      }
      *out = *std::move(dims);
    }
    if (spec.global_shape.size() != spec.local_shape.size()) {
      return p.error(path, absl::StrCat("global_shape ", shapeText(spec.global_shape),
                                        " and local_shape ", shapeText(spec.local_shape),
                                        " differ in rank"));
    }
    absl::StatusOr<const json*> role = p.field(b, path, "role", json::value_t::string);
    if (!role.ok()) return role.status();
    absl::StatusOr<BufferRole> parsedRole = parseRole((*role)->get<std::string>());
    if (!parsedRole.ok()) return p.error(path + ".role", std::string(parsedRole.status().message()));
    spec.role = *parsedRole;
    absl::StatusOr<const json*> placement = p.field(b, path, "placement", json::value_t::array);
    if (!placement.ok()) return placement.status();
    if ((*placement)->size() != axes.size()) {
      return p.error(path + ".placement", absl::StrCat("has ", (*placement)->size(),
                                                       " entries for a mesh of ", axes.size(), " axes"));
    }
    for (size_t a = 0; a < (*placement)->size(); ++a) {
      const json& entry = (**placement)[a];
      if (!entry.is_string()) return p.error(absl::StrCat(path, ".placement[", a, "]"), "expected a string");
      absl::StatusOr<AxisPlacement> axis = parseAxisPlacement(entry.get<std::string>());
      if (!axis.ok()) {
        return p.error(absl::StrCat(path, ".placement[", a, "]"), std::string(axis.status().message()));
      }
      if (axis->kind == AxisPlacement::Kind::kShard &&
          axis->dim >= static_cast<int64_t>(spec.global_shape.size())) {
        return p.error(absl::StrCat(path, ".placement[", a, "]"),
                       absl::StrCat("shards dim ", axis->dim, " of a rank-",
                                    spec.global_shape.size(), " tensor"));
      }
      spec.placement.push_back(*axis);
    }
    // The local shape must follow from the global shape and the placement.
    for (size_t d = 0; d < spec.global_shape.size(); ++d) {
      int64_t ways = 1;
      for (size_t a = 0; a < spec.placement.size(); ++a) {
        if (spec.placement[a].kind == AxisPlacement::Kind::kShard &&
            spec.placement[a].dim == static_cast<int64_t>(d)) {
          ways *= plan.mesh.shape()[a];
        }
      }
      const int64_t expected = mesh::shardSize(spec.global_shape[d], ways);
      if (expected != spec.local_shape[d]) {
        return p.error(path + ".local_shape",
                       absl::StrCat("dim ", d, " is ", spec.local_shape[d], ", but global size ",
                                    spec.global_shape[d], " split ", ways, " ways gives ", expected));
      }
    }
    absl::StatusOr<const json*> bytes = p.field(b, path, "bytes", json::value_t::number_integer);
    if (!bytes.ok()) return bytes.status();
    spec.bytes = (*bytes)->get<int64_t>();
    if (spec.bytes != spec.numel() * static_cast<int64_t>(comm::dtypeSize(spec.dtype))) {
      return p.error(path + ".bytes",
                     absl::StrCat("is ", spec.bytes, " but local_shape ", shapeText(spec.local_shape),
                                  " of ", std::string(comm::dtypeName(spec.dtype)), " holds ",
                                  spec.numel() * comm::dtypeSize(spec.dtype)));
    }
    const json& init = b.contains("init") ? b["init"] : json();
    if (!init.is_null()) {
      const std::string ipath = path + ".init";
      absl::StatusOr<const json*> kind = p.field(init, ipath, "kind", json::value_t::string);
      if (!kind.ok()) return kind.status();
      init::InitSpec s;
      const std::string k = (*kind)->get<std::string>();
      if (k == "normal") s.kind = init::InitSpec::Kind::kNormal;
      else if (k == "zeros") s.kind = init::InitSpec::Kind::kZeros;
      else if (k == "ones") s.kind = init::InitSpec::Kind::kOnes;
      else return p.error(ipath + ".kind", absl::StrCat("unknown init kind '", k, "'"));
      for (auto [key, out] : {std::pair{"mean", &s.mean}, std::pair{"std", &s.std}}) {
        absl::StatusOr<const json*> v = p.field(init, ipath, key, json::value_t::number_float);
        if (!v.ok()) return v.status();
        *out = (*v)->get<float>();
      }
      for (auto [key, out] : {std::pair{"seed", &s.seed}, std::pair{"stream", &s.stream_id}}) {
        absl::StatusOr<const json*> v = p.field(init, ipath, key, json::value_t::number_integer);
        if (!v.ok()) return v.status();
        *out = (*v)->get<uint64_t>();
      }
      spec.init = s;
    } else if (spec.role == BufferRole::kParam || spec.role == BufferRole::kOptimizerState) {
      return p.error(path + ".init", absl::StrCat("is null, but a ", bufferRoleName(spec.role),
                                                  " needs an init spec"));
    }
    bool entry = spec.role == BufferRole::kParam || spec.role == BufferRole::kOptimizerState;
    if (b.contains("live") && b["live"].is_array() && !b["live"].empty() &&
        b["live"][0].is_number_integer() && b["live"][0].get<int64_t>() == -1) {
      entry = true;
    }
    onEntry.push_back(entry);
    plan.buffers.push_back(std::move(spec));
  }
  const int64_t numBuffers = static_cast<int64_t>(plan.buffers.size());

  // Instructions, checked for references, definition before use and the
  // pairing of every async start with exactly one wait.
  absl::StatusOr<const json*> phases = p.field(root, "$", "phases", json::value_t::object);
  if (!phases.ok()) return phases.status();
  std::vector<bool> defined = onEntry;
  std::map<std::string, std::pair<int64_t, int64_t>> openHandles;  // handle -> (instr, result)
  for (Phase phase : {Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    const std::string name(phaseName(phase));
    absl::StatusOr<const json*> list = p.field(**phases, "$.phases", name.c_str(), json::value_t::array);
    if (!list.ok()) return list.status();
    for (size_t i = 0; i < (*list)->size(); ++i) {
      const json& in = (**list)[i];
      const std::string path = absl::StrCat("$.phases.", name, "[", i, "]");
      Instruction instr;
      instr.phase = phase;
      instr.position = static_cast<int64_t>(i);
      absl::StatusOr<const json*> op = p.field(in, path, "op", json::value_t::string);
      if (!op.ok()) return op.status();
      instr.op = (*op)->get<std::string>();
      const OpInfo* info = findOp(instr.op);
      if (info == nullptr) {
        return p.error(path + ".op", absl::StrCat("'", instr.op,
                                                  "' is not an op this runtime executes (supported: ",
                                                  std::string(opNames()), ")"));
      }
      if (in.contains("index") && in["index"].is_number_integer()) instr.index = in["index"].get<int64_t>();
      absl::StatusOr<const json*> stream = p.field(in, path, "stream", json::value_t::string);
      if (!stream.ok()) return stream.status();
      if (**stream != "compute" && **stream != "comm") {
        return p.error(path + ".stream", "must be \"compute\" or \"comm\"");
      }
      instr.comm_stream = **stream == "comm";
      for (auto [key, out] : {std::pair{"operands", &instr.operands}, std::pair{"results", &instr.results}}) {
        absl::StatusOr<const json*> refs = p.field(in, path, key, json::value_t::array);
        if (!refs.ok()) return refs.status();
        absl::StatusOr<std::vector<int64_t>> ids = p.ints(**refs, absl::StrCat(path, ".", key));
        if (!ids.ok()) return ids.status();
        for (size_t k = 0; k < ids->size(); ++k) {
          if ((*ids)[k] < 0 || (*ids)[k] >= numBuffers) {
            return p.error(absl::StrCat(path, ".", key, "[", k, "]"),
                           absl::StrCat("buffer ", (*ids)[k], " does not exist (the plan has ",
                                        numBuffers, " buffers)"));
          }
        }
        *out = *std::move(ids);
      }
      if (absl::Status arity = checkArity(*info, instr, path, p); !arity.ok()) return arity;
      absl::StatusOr<const json*> attrs = p.field(in, path, "attrs", json::value_t::object);
      if (!attrs.ok()) return attrs.status();
      instr.attrs = **attrs;
      if (in.contains("start_s") && in["start_s"].is_number()) instr.predicted_start_s = in["start_s"];
      if (in.contains("duration_s") && in["duration_s"].is_number()) {
        instr.predicted_duration_s = in["duration_s"];
      }
      for (size_t k = 0; k < instr.operands.size(); ++k) {
        if (!defined[instr.operands[k]]) {
          return p.error(absl::StrCat(path, ".operands[", k, "]"),
                         absl::StrCat("buffer ", instr.operands[k], " (",
                                      plan.buffers[instr.operands[k]].name,
                                      ") is used before any instruction defines it"));
        }
      }
      for (size_t k = 0; k < instr.results.size(); ++k) {
        if (defined[instr.results[k]] && !info->in_place) {
          return p.error(absl::StrCat(path, ".results[", k, "]"),
                         absl::StrCat("buffer ", instr.results[k], " (",
                                      plan.buffers[instr.results[k]].name, ") is defined twice"));
        }
        defined[instr.results[k]] = true;
      }
      const bool isStart = info->async_start;
      if (isStart || info->family == OpFamily::kWait) {
        if (!instr.attrs.contains("async_handle") || !instr.attrs["async_handle"].is_string()) {
          return p.error(path + ".attrs.async_handle", "missing on an async collective or wait");
        }
        instr.async_handle = instr.attrs["async_handle"].get<std::string>();
        if (isStart) {
          if (openHandles.count(instr.async_handle)) {
            return p.error(path + ".attrs.async_handle",
                           absl::StrCat("'", instr.async_handle, "' is started twice"));
          }
          openHandles[instr.async_handle] = {static_cast<int64_t>(plan.instructions.size()),
                                             instr.results[0]};
        } else {
          auto it = openHandles.find(instr.async_handle);
          if (it == openHandles.end()) {
            return p.error(path + ".attrs.async_handle",
                           absl::StrCat("'", instr.async_handle, "' is waited without a start"));
          }
          if (it->second.second != instr.operands[0]) {
            return p.error(path + ".operands[0]",
                           absl::StrCat("waits on buffer ", instr.operands[0], " but '",
                                        instr.async_handle, "' started buffer ", it->second.second));
          }
          openHandles.erase(it);
        }
      }
      plan.instructions.push_back(std::move(instr));
    }
  }
  if (!openHandles.empty()) {
    return p.error("$.phases", absl::StrCat("async collective '", openHandles.begin()->first,
                                            "' is never waited; every start needs a dist.wait"));
  }

  // Interface.
  absl::StatusOr<const json*> interface = p.field(root, "$", "interface", json::value_t::object);
  if (!interface.ok()) return interface.status();
  for (auto [key, out] : {std::pair{"ids", &plan.interface.ids}, std::pair{"labels", &plan.interface.labels},
                          std::pair{"loss_grad_seed", &plan.interface.loss_grad_seed},
                          std::pair{"loss", &plan.interface.loss}}) {
    absl::StatusOr<const json*> id = p.field(**interface, "$.interface", key, json::value_t::number_integer);
    if (!id.ok()) return id.status();
    *out = (*id)->get<int64_t>();
    if (*out < 0 || *out >= numBuffers) {
      return p.error(absl::StrCat("$.interface.", key), absl::StrCat("buffer ", *out, " does not exist"));
    }
  }
  if (const json& positions = (**interface).value("positions", json()); !positions.is_null()) {
    if (!positions.is_number_integer() || positions.get<int64_t>() < 0 ||
        positions.get<int64_t>() >= numBuffers) {
      return p.error("$.interface.positions", "must name a buffer");
    }
    plan.interface.positions = positions.get<int64_t>();
    const BufferSpec& pos = plan.buffers[plan.interface.positions];
    const BufferSpec& ids = plan.buffers[plan.interface.ids];
    if (pos.local_shape != ids.local_shape || pos.dtype != comm::DType::kInt32) {
      return p.error("$.interface.positions", "must be i32 and shaped like the ids");
    }
  }
  if (const json& vocab = (**interface).value("vocab", json()); !vocab.is_null()) {
    if (!vocab.is_number_integer() || vocab.get<int64_t>() < 1) {
      return p.error("$.interface.vocab", "must be a positive integer");
    }
    plan.interface.vocab = vocab.get<int64_t>();
  }
  for (auto [key, id] : {std::pair{"ids", plan.interface.ids}, std::pair{"labels", plan.interface.labels}}) {
    const BufferSpec& b = plan.buffers[id];
    if (b.dtype != comm::DType::kInt32 || b.global_shape.size() != 2) {
      return p.error(absl::StrCat("$.interface.", key),
                     absl::StrCat("buffer ", id, " is ", std::string(comm::dtypeName(b.dtype)), " ",
                                  shapeText(b.global_shape), "; expected i32 [batch, seq]"));
    }
  }
  if (!plan.buffers[plan.interface.loss].global_shape.empty()) {
    return p.error("$.interface.loss", "the loss must be a scalar");
  }

  if (root.contains("topology") && root["topology"].is_object() && root["topology"].contains("device") &&
      root["topology"]["device"].is_object()) {
    const json& device = root["topology"]["device"];
    if (device.contains("name") && device["name"].is_string()) plan.predicted.device = device["name"];
    for (auto [key, field] : {std::pair{"peak_flops_bf16", &plan.predicted.peak_flops_bf16},
                              std::pair{"peak_flops_fp32", &plan.predicted.peak_flops_fp32}}) {
      if (device.contains(key) && device[key].is_number()) *field = device[key];
    }
  }
  // Predicted figures (optional beyond what the schema requires).
  if (root.contains("predicted") && root["predicted"].is_object()) {
    const json& pr = root["predicted"];
    if (pr.contains("step_time_s") && pr["step_time_s"].is_number()) plan.predicted.step_time_s = pr["step_time_s"];
    if (pr.contains("compute_s") && pr["compute_s"].is_number()) plan.predicted.compute_s = pr["compute_s"];
    if (pr.contains("model_flops") && pr["model_flops"].is_number()) plan.predicted.model_flops = pr["model_flops"];
    if (pr.contains("exposed_comm_s") && pr["exposed_comm_s"].is_number()) {
      plan.predicted.exposed_comm_s = pr["exposed_comm_s"];
    }
    if (pr.contains("peak_bytes") && pr["peak_bytes"].is_number_integer()) plan.predicted.peak_bytes = pr["peak_bytes"];
    if (pr.contains("breakdown") && pr["breakdown"].is_object()) {
      for (auto it = pr["breakdown"].begin(); it != pr["breakdown"].end(); ++it) {
        if (it->is_number_integer()) plan.predicted.breakdown[it.key()] = it->get<int64_t>();
      }
    }
  }
  return plan;
}

absl::StatusOr<Plan> loadPlan(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open plan '", path,
                                            "'; write one with: bazel run //tools:plan -- --out=DIR"));
  }
  std::stringstream text;
  text << in.rdbuf();
  json root = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  return parsePlan(root, path);
}

absl::Status checkPlanForJob(const Plan& plan, int64_t world_size) {
  if (plan.worldSize() != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.source, ": $.mesh: the plan is for ", plan.worldSize(), " ranks (mesh ",
        plan.mesh.toString(), ") but the job has ", world_size,
        "; start it with --nproc=", plan.worldSize(), " or re-plan with --mesh for ", world_size,
        " ranks"));
  }
  return absl::OkStatus();
}

}  // namespace loom::runtime
