// checkPlan (plan.h): what relates one field of a plan to another. The
// reader runs it on every plan it reads and the exporter on every plan it
// writes, so a plan that passes here is one the runtime can bind. Errors
// name the JSON path of the field at fault.
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/shard_math.h"
#include "plan/attrs_codec.h"
#include "plan/lifetimes.h"
#include "plan/plan.h"

namespace loom::plan {
namespace {

std::string shapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// "1 operand", "2 to 3 results", "1 or more operands".
std::string countRange(int low, int high, const char* noun) {
  const std::string count = high < 0      ? absl::StrCat(low, " or more")
                            : low == high ? absl::StrCat(low)
                                          : absl::StrCat(low, " to ", high);
  return absl::StrCat(count, " ", noun, low == 1 && high == 1 ? "" : "s");
}

class Checker {
 public:
  explicit Checker(const Plan& plan) : plan_(plan) {}

  absl::Status error(absl::string_view path, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(plan_.source, ": ", path, ": ", what));
  }

  absl::Status run() const;

 private:
  absl::Status checkMesh() const;
  absl::Status checkBuffer(const Buffer& b, size_t i) const;
  absl::Status checkPrograms() const;
  absl::Status checkSchedule(const Program& program, const std::string& path) const;
  absl::Status checkInstruction(const Instruction& in, const std::string& path) const;
  absl::Status checkAttrs(const Instruction& in, const std::string& path) const;
  absl::Status checkDataflow(const Program& program, const std::string& path) const;
  // Host buffers (docs/planner_offload.md): only copies and the optimizer
  // steps of offloaded states touch them, and the topology prices them.
  absl::Status checkHostBuffers(const Program& program) const;
  absl::Status checkCopy(const Instruction& in, const std::string& path) const;
  absl::Status checkLifetimes(const Program& program) const;
  // Each send and receive goes along the pipeline axis to another stage;
  // then every send has one receive in its peer's program (same tag, shape
  // and dtype), and every receive one send.
  absl::Status checkPeers(const Program& program) const;
  absl::Status checkPairs() const;
  // A replica is another stage's copy of its primary (same tensor), which
  // the lowest stage holding the tensor holds.
  absl::Status checkReplicas() const;
  absl::Status checkReplicaOf(const Buffer& b, const std::vector<int64_t>& lowest) const;
  absl::Status checkInterface() const;
  // "$.programs[0].blocks[1].instructions[4]".
  std::string pathOf(const Program& program, const Instruction& in) const;

  const Plan& plan_;
};

#define LOOM_RETURN_IF_ERROR(expr)                     \
  do {                                                 \
    if (absl::Status s_ = (expr); !s_.ok()) return s_; \
  } while (0)

absl::Status Checker::run() const {
  LOOM_RETURN_IF_ERROR(checkMesh());
  for (size_t i = 0; i < plan_.buffers.size(); ++i) {
    LOOM_RETURN_IF_ERROR(checkBuffer(plan_.buffers[i], i));
  }
  LOOM_RETURN_IF_ERROR(checkInterface());
  LOOM_RETURN_IF_ERROR(checkPrograms());
  return checkReplicas();
}

absl::Status Checker::checkMesh() const {
  if (static_cast<int64_t>(plan_.strategies.size()) != plan_.mesh.ndim()) {
    return error("$.strategies",
                 absl::StrCat("has ", plan_.strategies.size(), " entries for a mesh of ",
                              plan_.mesh.ndim(), " axes"));
  }
  for (size_t a = 0; a < plan_.strategies.size(); ++a) {
    const std::string& s = plan_.strategies[a];
    if (s != "fsdp" && s != "dp" && s != "tp" && s != "pp") {
      return error(absl::StrCat("$.strategies[", a, "]"),
                   absl::StrCat("is '", s, "'; expected fsdp, dp, tp or pp"));
    }
  }
  if (plan_.micro_batches < 1) return error("$.micro_batches", "must be at least 1");
  return absl::OkStatus();
}

absl::Status Checker::checkBuffer(const Buffer& b, size_t i) const {
  const std::string path = absl::StrCat("$.buffers[", i, "]");
  if (b.id != static_cast<int64_t>(i)) {
    return error(path + ".id", absl::StrCat("is ", b.id, "; ids must equal the index ", i));
  }
  if (b.global_shape.size() != b.local_shape.size()) {
    return error(path, absl::StrCat("global_shape ", shapeText(b.global_shape), " and local_shape ",
                                    shapeText(b.local_shape), " differ in rank"));
  }
  if (static_cast<int64_t>(b.placement.size()) != plan_.mesh.ndim()) {
    return error(path + ".placement",
                 absl::StrCat("has ", b.placement.size(), " entries for a mesh of ",
                              plan_.mesh.ndim(), " axes"));
  }
  for (size_t a = 0; a < b.placement.size(); ++a) {
    const AxisPlacement& p = b.placement[a];
    if (p.kind == AxisPlacement::Kind::kShard &&
        p.dim >= static_cast<int64_t>(b.global_shape.size())) {
      return error(
          absl::StrCat(path, ".placement[", a, "]"),
          absl::StrCat("shards dim ", p.dim, " of a rank-", b.global_shape.size(), " tensor"));
    }
  }
  for (size_t d = 0; d < b.global_shape.size(); ++d) {
    if (b.global_shape[d] < 0 || b.local_shape[d] < 0) return error(path, "has a negative dim");
    int64_t ways = 1;
    for (size_t a = 0; a < b.placement.size(); ++a) {
      const AxisPlacement& p = b.placement[a];
      if (p.kind == AxisPlacement::Kind::kShard && p.dim == static_cast<int64_t>(d)) {
        ways *= plan_.mesh.shape()[a];
      }
    }
    const int64_t expected = mesh::shardSize(b.global_shape[d], ways);
    if (expected != b.local_shape[d]) {
      return error(path + ".local_shape",
                   absl::StrCat("dim ", d, " is ", b.local_shape[d], ", but global size ",
                                b.global_shape[d], " split ", ways, " ways gives ", expected));
    }
  }
  const int64_t bytes = b.numel() * static_cast<int64_t>(comm::dtypeSize(b.dtype));
  if (b.bytes != bytes) {
    return error(path + ".bytes",
                 absl::StrCat("is ", b.bytes, " but local_shape ", shapeText(b.local_shape), " of ",
                              std::string(comm::dtypeName(b.dtype)), " holds ", bytes));
  }
  if (persistentRole(b.role) && !b.init) {
    return error(path + ".init",
                 absl::StrCat("is null, but a ", roleName(b.role), " needs an init spec"));
  }
  return absl::OkStatus();
}

absl::Status Checker::checkInterface() const {
  const Interface& io = plan_.interface;
  const int64_t n = static_cast<int64_t>(plan_.buffers.size());
  for (auto [key, id] :
       {std::pair{"ids", io.ids}, std::pair{"labels", io.labels},
        std::pair{"loss_grad_seed", io.loss_grad_seed}, std::pair{"loss", io.loss}}) {
    if (id < 0 || id >= n) {
      return error(absl::StrCat("$.interface.", key),
                   absl::StrCat("buffer ", id, " does not exist (the plan has ", n, " buffers)"));
    }
  }
  for (auto [key, id] : {std::pair{"ids", io.ids}, std::pair{"labels", io.labels}}) {
    const Buffer& b = plan_.buffers[id];
    if (b.dtype != comm::DType::kInt32 || b.global_shape.size() != 2) {
      return error(absl::StrCat("$.interface.", key),
                   absl::StrCat("buffer ", id, " is ", std::string(comm::dtypeName(b.dtype)), " ",
                                shapeText(b.global_shape), "; expected i32 [batch, seq]"));
    }
  }
  if (io.positions != -1) {
    if (io.positions < 0 || io.positions >= n)
      return error("$.interface.positions", "must name a buffer");
    const Buffer& pos = plan_.buffers[io.positions];
    if (pos.local_shape != plan_.buffers[io.ids].local_shape || pos.dtype != comm::DType::kInt32) {
      return error("$.interface.positions", "must be i32 and shaped like the ids");
    }
  }
  if (io.vocab < 0) return error("$.interface.vocab", "must be a positive integer");
  if (!plan_.buffers[io.loss].global_shape.empty())
    return error("$.interface.loss", "the loss must be a scalar");
  return absl::OkStatus();
}

absl::Status Checker::checkPrograms() const {
  int64_t stages = 1;
  for (size_t a = 0; a < plan_.strategies.size(); ++a) {
    if (plan_.strategies[a] == "pp") stages = plan_.mesh.shape()[a];
  }
  if (static_cast<int64_t>(plan_.programs.size()) != stages) {
    return error("$.programs",
                 absl::StrCat("has ", plan_.programs.size(), " programs; a plan with ", stages,
                              " pipeline stage", stages == 1 ? "" : "s", " has one per stage"));
  }
  const std::vector<int64_t>& stagePeaks = plan_.predicted.stage_peak_bytes;
  if (!stagePeaks.empty() && stagePeaks.size() != plan_.programs.size()) {
    return error("$.predicted.stage_peak_bytes",
                 absl::StrCat("has ", stagePeaks.size(), " entries for ", plan_.programs.size(),
                              " programs; give one peak per program, or none"));
  }
  std::set<int64_t> seen;
  for (size_t p = 0; p < plan_.programs.size(); ++p) {
    const Program& program = plan_.programs[p];
    const std::string path = absl::StrCat("$.programs[", p, "]");
    if (program.stage < 0 || program.stage >= stages || !seen.insert(program.stage).second) {
      return error(path + ".stage", absl::StrCat("is ", program.stage, "; stages are 0 to ",
                                                 stages - 1, ", each once"));
    }
    LOOM_RETURN_IF_ERROR(checkSchedule(program, path));
    for (size_t b = 0; b < program.blocks.size(); ++b) {
      const Block& block = program.blocks[b];
      for (size_t i = 0; i < block.instructions.size(); ++i) {
        LOOM_RETURN_IF_ERROR(checkInstruction(
            block.instructions[i], absl::StrCat(path, ".blocks[", b, "].instructions[", i, "]")));
      }
    }
    LOOM_RETURN_IF_ERROR(checkDataflow(program, path));
    LOOM_RETURN_IF_ERROR(checkHostBuffers(program));
    LOOM_RETURN_IF_ERROR(checkLifetimes(program));
    LOOM_RETURN_IF_ERROR(checkPeers(program));
  }
  return checkPairs();
}

absl::Status Checker::checkPeers(const Program& program) const {
  for (const Instruction* in : program.instructions()) {
    if (in->info->family != OpFamily::kPointToPoint) continue;
    const std::string path = pathOf(program, *in) + ".attrs";
    if (in->attrs.mesh_axes.size() != 1) {
      return error(path + ".mesh_axes",
                   absl::StrCat("names ", in->attrs.mesh_axes.size(), " axes; ", in->op,
                                " goes along one axis, the pipeline's"));
    }
    // checkAttrs found the axis in the mesh.
    const size_t axis = *plan_.mesh.axisIndex(in->attrs.mesh_axes[0]);
    if (plan_.strategies[axis] != "pp") {
      return error(path + ".mesh_axes",
                   absl::StrCat("'", in->attrs.mesh_axes[0], "' is a ", plan_.strategies[axis],
                                " axis; point-to-point ops connect pipeline stages (a pp axis)"));
    }
    const int64_t peer = *in->attrs.peer, stages = plan_.mesh.shape()[axis];
    if (peer < 0 || peer >= stages || peer == program.stage) {
      return error(path + ".peer",
                   absl::StrCat("is ", peer, "; stage ", program.stage,
                                " exchanges with another of ", "stages 0 to ", stages - 1));
    }
    if (*in->attrs.tag < 0) return error(path + ".tag", "must be >= 0");
  }
  return absl::OkStatus();
}

absl::Status Checker::checkPairs() const {
  // (sender, receiver, tag) -> the buffer sent or received, and where.
  struct End {
    int64_t buffer = -1;
    std::string path;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  std::map<Key, End> sends, recvs;
  for (const Program& program : plan_.programs) {
    for (const Instruction* in : program.instructions()) {
      if (in->info->family != OpFamily::kPointToPoint) continue;
      const bool send = in->info->p2p == PointToPoint::kSend;
      const Key key = send ? Key{program.stage, *in->attrs.peer, *in->attrs.tag}
                           : Key{*in->attrs.peer, program.stage, *in->attrs.tag};
      const End end{send ? in->operands[0] : in->results[0], pathOf(program, *in)};
      if (!(send ? sends : recvs).emplace(key, end).second) {
        return error(end.path + ".attrs.tag",
                     absl::StrCat("stage ", std::get<0>(key), " sends stage ", std::get<1>(key),
                                  " two tensors with tag ", std::get<2>(key),
                                  "; each transfer between two stages needs its own tag"));
      }
    }
  }
  for (const auto& [key, recv] : recvs) {
    if (!sends.count(key)) {
      return error(recv.path, absl::StrCat("receives tag ", std::get<2>(key), " from stage ",
                                           std::get<0>(key), ", which sends nothing with it"));
    }
  }
  for (const auto& [key, send] : sends) {
    auto it = recvs.find(key);
    if (it == recvs.end()) {
      return error(send.path, absl::StrCat("sends tag ", std::get<2>(key), " to stage ",
                                           std::get<1>(key), ", which receives nothing with it"));
    }
    const Buffer& out = plan_.buffers[send.buffer];
    const Buffer& in = plan_.buffers[it->second.buffer];
    if (out.local_shape != in.local_shape || out.dtype != in.dtype) {
      return error(
          it->second.path,
          absl::StrCat("receives ", std::string(comm::dtypeName(in.dtype)),
                       shapeText(in.local_shape), " but ", send.path, " sends ",
                       std::string(comm::dtypeName(out.dtype)), shapeText(out.local_shape)));
    }
  }
  return absl::OkStatus();
}

absl::Status Checker::checkSchedule(const Program& program, const std::string& path) const {
  std::set<std::string> names;
  for (size_t b = 0; b < program.blocks.size(); ++b) {
    if (!names.insert(program.blocks[b].name).second) {
      return error(absl::StrCat(path, ".blocks[", b, "].name"),
                   absl::StrCat("'", program.blocks[b].name, "' names two blocks"));
    }
  }
  std::set<std::string> run;
  std::set<std::pair<std::string, int64_t>> runs;  // (block, micro-batch)
  for (size_t s = 0; s < program.schedule.size(); ++s) {
    const ScheduleEntry& entry = program.schedule[s];
    const std::string spath = absl::StrCat(path, ".schedule[", s, "]");
    const Block* block = program.block(entry.block);
    if (block == nullptr) {
      return error(spath + ".block",
                   absl::StrCat("'", entry.block, "' is not a block of this program"));
    }
    const bool once = block->phase == Phase::kOptimizer;
    if (once ? entry.micro_batch != -1
             : entry.micro_batch < 0 || entry.micro_batch >= plan_.micro_batches) {
      return error(
          spath + ".micro_batch",
          once ? absl::StrCat("the ", entry.block, " block runs once per step, for no micro-batch")
               : absl::StrCat("is ", entry.micro_batch, "; micro-batches are 0 to ",
                              plan_.micro_batches - 1));
    }
    run.insert(entry.block);
    if (!once && !runs.insert({entry.block, entry.micro_batch}).second) {
      return error(
          spath, absl::StrCat("runs ", entry.block, " twice for micro-batch ", entry.micro_batch));
    }
  }
  // A model block runs once per micro-batch: each sees all the rows.
  for (const Block& block : program.blocks) {
    if (block.phase == Phase::kOptimizer) continue;
    for (int64_t m = 0; m < plan_.micro_batches; ++m) {
      if (!runs.count({block.name, m})) {
        return error(path + ".schedule",
                     absl::StrCat("never runs ", block.name, " for micro-batch ", m, " of ",
                                  plan_.micro_batches,
                                  "; every model block runs once per "
                                  "micro-batch"));
      }
    }
  }
  for (size_t b = 0; b < program.blocks.size(); ++b) {
    if (!run.count(program.blocks[b].name)) {
      return error(
          absl::StrCat(path, ".blocks[", b, "]"),
          absl::StrCat("'", program.blocks[b].name, "' never runs: the schedule does not name it"));
    }
  }
  return absl::OkStatus();
}

absl::Status Checker::checkInstruction(const Instruction& in, const std::string& path) const {
  const OpInfo& info = *in.info;
  auto fits = [](size_t n, int low, int high) {
    return static_cast<int>(n) >= low && (high < 0 || static_cast<int>(n) <= high);
  };
  if (!fits(in.operands.size(), info.min_operands, info.max_operands) ||
      !fits(in.results.size(), info.min_results, info.max_results)) {
    return error(
        path,
        absl::StrCat(in.op, " takes ", countRange(info.min_operands, info.max_operands, "operand"),
                     " and ", countRange(info.min_results, info.max_results, "result"),
                     "; this one has ", in.operands.size(), " and ", in.results.size(),
                     " (re-plan with this build's //tools:plan)"));
  }
  const bool optimizer = in.phase == Phase::kOptimizer;
  if ((info.phases == PhaseSet::kModel && optimizer) ||
      (info.phases == PhaseSet::kOptimizer && !optimizer)) {
    return error(path, absl::StrCat(in.op, " cannot run in a ", phaseName(in.phase), " block"));
  }
  if (in.recompute && (in.phase != Phase::kBackward || info.family != OpFamily::kCompute)) {
    return error(path + ".recompute",
                 absl::StrCat("marks ", in.op, " in a ", phaseName(in.phase),
                              " block; only compute ops of the backward pass are recomputed "
                              "(re-plan with this build's //tools:plan)"));
  }
  if (in.micro_step != MicroStep::kEvery &&
      (optimizer || info.family == OpFamily::kCompute || info.accumulates)) {
    return error(path + ".micro_step",
                 absl::StrCat("runs ", in.op, " in the ", microStepName(in.micro_step),
                              " micro-step only; only the collectives and buffer ops of a "
                              "forward or backward block are kept or deferred between "
                              "micro-steps (re-plan with this build's //tools:plan)"));
  }
  const int64_t n = static_cast<int64_t>(plan_.buffers.size());
  for (auto [key, ids] : {std::pair{"operands", &in.operands}, std::pair{"results", &in.results}}) {
    for (size_t k = 0; k < ids->size(); ++k) {
      if ((*ids)[k] < 0 || (*ids)[k] >= n) {
        return error(
            absl::StrCat(path, ".", key, "[", k, "]"),
            absl::StrCat("buffer ", (*ids)[k], " does not exist (the plan has ", n, " buffers)"));
      }
    }
  }
  return checkAttrs(in, path);
}

absl::Status Checker::checkAttrs(const Instruction& in, const std::string& path) const {
  for (int i = 0; i < kNumAttrs; ++i) {
    const AttrId id = static_cast<AttrId>(i);
    const AttrUse* use = in.info->findAttr(id);
    const bool has = internal::hasAttr(id, in.attrs);
    if (use == nullptr && has) {
      return error(absl::StrCat(path, ".attrs.", attrName(id)),
                   absl::StrCat("is not an attribute of ", in.op));
    }
    if (use != nullptr && use->required && !has) {
      return error(absl::StrCat(path, ".attrs.", attrName(id)),
                   absl::StrCat("is missing; ", in.op, " needs it"));
    }
  }
  int64_t group = 1;
  for (const std::string& axis : in.attrs.mesh_axes) {
    absl::StatusOr<size_t> a = plan_.mesh.axisIndex(axis);
    if (!a.ok()) {
      return error(path + ".attrs.mesh_axes",
                   absl::StrCat("'", axis, "' is not an axis of the mesh ", plan_.mesh.toString()));
    }
    group *= plan_.mesh.shape()[*a];
  }
  if (in.attrs.group_size && *in.attrs.group_size != group) {
    return error(
        path + ".attrs.group_size",
        absl::StrCat("is ", *in.attrs.group_size, " but the axes' sizes multiply to ", group));
  }
  return absl::OkStatus();
}

// Definition before use, one definition per buffer (in-place ops define
// again), and each async start waited once, on the buffer it started.
absl::Status Checker::checkDataflow(const Program& program, const std::string& path) const {
  std::vector<bool> defined(plan_.buffers.size());
  for (size_t id = 0; id < defined.size(); ++id) defined[id] = onEntry(plan_, id);
  std::map<std::string, int64_t> open;  // handle -> the buffer its start defined
  // Handles of starts that update a buffer in place: their wait yields that
  // buffer again.
  std::set<std::string> inPlace;
  for (const Instruction* in : program.instructions()) {
    // Only an error needs the path, and building it for every instruction
    // would cost more than the checks.
    auto where = [&] { return pathOf(program, *in); };
    for (size_t k = 0; k < in->operands.size(); ++k) {
      const int64_t id = in->operands[k];
      if (!defined[id]) {
        return error(absl::StrCat(where(), ".operands[", k, "]"),
                     absl::StrCat("buffer ", id, " (", plan_.buffers[id].name,
                                  ") is used before any instruction defines it"));
      }
    }
    const bool waitInPlace =
        in->info->family == OpFamily::kWait && inPlace.count(in->attrs.async_handle) > 0;
    if (waitInPlace && in->results[0] != in->operands[0]) {
      return error(absl::StrCat(where(), ".results[0]"),
                   absl::StrCat("is buffer ", in->results[0], " but '", in->attrs.async_handle,
                                "' updates buffer ", in->operands[0],
                                " in place; its wait yields that buffer"));
    }
    for (size_t k = 0; k < in->results.size(); ++k) {
      const int64_t id = in->results[k];
      if (defined[id] && !in->info->in_place && !waitInPlace) {
        return error(
            absl::StrCat(where(), ".results[", k, "]"),
            absl::StrCat("buffer ", id, " (", plan_.buffers[id].name, ") is defined twice"));
      }
      defined[id] = true;
    }
    const std::string& handle = in->attrs.async_handle;
    if (in->info->async_start) {
      if (!open.emplace(handle, in->results[0]).second) {
        return error(where() + ".attrs.async_handle",
                     absl::StrCat("'", handle, "' is started twice"));
      }
      if (in->info->in_place) inPlace.insert(handle);
    } else if (in->info->family == OpFamily::kWait) {
      auto it = open.find(handle);
      if (it == open.end()) {
        return error(where() + ".attrs.async_handle",
                     absl::StrCat("'", handle, "' is waited without a start"));
      }
      if (it->second != in->operands[0]) {
        return error(where() + ".operands[0]",
                     absl::StrCat("waits on buffer ", in->operands[0], " but '", handle,
                                  "' started buffer ", it->second));
      }
      open.erase(it);
    }
  }
  if (!open.empty()) {
    return error(path, absl::StrCat("async collective '", open.begin()->first,
                                    "' is never waited; every start needs a dist.wait"));
  }
  return absl::OkStatus();
}

absl::Status Checker::checkReplicas() const {
  const size_t n = plan_.buffers.size();
  // The lowest stage whose program holds each buffer; -1: none.
  std::vector<int64_t> lowest(n, -1);
  for (const Program& program : plan_.programs) {
    std::vector<bool> here(n, false);
    for (const Instruction* in : program.instructions()) {
      for (const std::vector<int64_t>* ids : {&in->operands, &in->results}) {
        for (int64_t id : *ids) here[id] = true;
      }
    }
    for (size_t id = 0; id < n; ++id) {
      if (!here[id]) continue;
      if (lowest[id] < 0 || program.stage < lowest[id]) lowest[id] = program.stage;
      const int64_t primary = plan_.buffers[id].replica_of;
      if (primary >= 0 && primary < static_cast<int64_t>(n) &&
          primary != static_cast<int64_t>(id) && here[primary]) {
        return error(absl::StrCat("$.buffers[", id, "].replica_of"),
                     absl::StrCat("is ", primary, ", but stage ", program.stage,
                                  "'s program holds both copies of ", plan_.buffers[id].name,
                                  "; a stage holds one"));
      }
    }
  }
  for (const Buffer& b : plan_.buffers) {
    if (b.replica_of >= 0) LOOM_RETURN_IF_ERROR(checkReplicaOf(b, lowest));
  }
  return absl::OkStatus();
}

absl::Status Checker::checkHostBuffers(const Program& program) const {
  bool any = false;
  for (const Buffer& b : plan_.buffers) any |= b.onHost();
  if (!any) return absl::OkStatus();
  const Topology& t = plan_.topology;
  if (!(t.host.bandwidth_bytes_per_s > 0) || !(t.host_memory_bandwidth_bytes_per_s > 0) ||
      t.host_memory_bytes <= 0) {
    return error("$.topology",
                 "the plan holds host buffers but its topology has no host link or host memory "
                 "(links.host, device.host_memory_bytes and host_memory_bandwidth_bytes_per_s); "
                 "re-plan with this build's //tools:plan");
  }
  std::map<std::string, const Instruction*> startOf;
  for (const Instruction* in : program.instructions()) {
    const std::string path = pathOf(program, *in);
    const OpFamily family = in->info->family;
    if (family == OpFamily::kCopy) {
      LOOM_RETURN_IF_ERROR(checkCopy(*in, path));
      startOf[in->attrs.async_handle] = in;
      continue;
    }
    // A wait yields what its start made, where its start made it.
    if (family == OpFamily::kWait && startOf.count(in->attrs.async_handle)) continue;
    std::vector<int64_t> ids = in->operands;
    ids.insert(ids.end(), in->results.begin(), in->results.end());
    const bool host = !ids.empty() && plan_.buffers[ids.front()].onHost();
    for (int64_t id : ids) {
      const Buffer& b = plan_.buffers[id];
      if (family == OpFamily::kOptimizer) {
        if (b.onHost() == host) continue;
        return error(path, absl::StrCat(in->op, " mixes host and device buffers (", b.name,
                                        " is in ", memorySpaceName(b.memory),
                                        " memory); an optimizer step runs where all its "
                                        "tensors live"));
      }
      if (!b.onHost()) continue;
      return error(path, absl::StrCat(in->op, " reads or writes host buffer ", b.id, " (", b.name,
                                      "); only copies and the optimizer steps of offloaded "
                                      "states touch host memory (re-plan with this build's "
                                      "//tools:plan)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Checker::checkReplicaOf(const Buffer& b, const std::vector<int64_t>& lowest) const {
  const std::string path = absl::StrCat("$.buffers[", b.id, "].replica_of");
  const int64_t n = static_cast<int64_t>(plan_.buffers.size());
  if (plan_.programs.size() < 2 || b.replica_of >= n || b.replica_of == b.id) {
    return error(path, absl::StrCat("is ", b.replica_of,
                                    "; a replica names another buffer, held by a lower pipeline "
                                    "stage (a plan of ",
                                    plan_.programs.size(), " programs and ", n, " buffers)"));
  }
  const Buffer& p = plan_.buffers[b.replica_of];
  if (p.replica_of >= 0) {
    return error(path, absl::StrCat("is ", p.id, ", itself a replica of ", p.replica_of,
                                    "; name the primary ", p.replica_of));
  }
  const char* differs = p.name != b.name                   ? "name"
                        : p.dtype != b.dtype               ? "dtype"
                        : p.global_shape != b.global_shape ? "global_shape"
                        : p.local_shape != b.local_shape   ? "local_shape"
                        : p.placement != b.placement       ? "placement"
                        : p.role != b.role                 ? "role"
                        : p.init != b.init                 ? "init"
                                                           : nullptr;
  if (differs != nullptr) {
    return error(path, absl::StrCat("is ", p.id, " (", p.name, "), whose ", differs,
                                    " differs from this copy's (", b.name,
                                    "); replicas are the same tensor"));
  }
  if (lowest[b.id] >= 0 && (lowest[p.id] < 0 || lowest[p.id] >= lowest[b.id])) {
    return error(path, absl::StrCat("is ", p.id, " (", p.name, "), held from stage ", lowest[p.id],
                                    ", not below this copy's stage ", lowest[b.id],
                                    "; the lowest stage's copy is the primary"));
  }
  return absl::OkStatus();
}

absl::Status Checker::checkCopy(const Instruction& in, const std::string& path) const {
  const bool toHost = !in.info->in_place;
  const Buffer& src = plan_.buffers[in.operands[0]];
  const Buffer& dst = plan_.buffers[toHost ? in.results[0] : in.operands[1]];
  if (src.onHost() == toHost || dst.onHost() != toHost) {
    return error(path, absl::StrCat(in.op, " copies ", toHost ? "device to host" : "host to device",
                                    " but reads ", memorySpaceName(src.memory), " buffer ",
                                    src.id, " (", src.name, ") into ", memorySpaceName(dst.memory),
                                    " buffer ", dst.id, " (", dst.name, ")"));
  }
  if (!toHost && in.results[0] != dst.id) {
    return error(path + ".results[0]",
                 absl::StrCat("is buffer ", in.results[0], "; ", in.op,
                              " updates its destination, operand 1 (buffer ", dst.id,
                              "), in place"));
  }
  if (src.local_shape != dst.local_shape || (toHost && src.dtype != dst.dtype)) {
    return error(path, absl::StrCat(in.op, " copies ", std::string(comm::dtypeName(src.dtype)),
                                    shapeText(src.local_shape), " into ",
                                    std::string(comm::dtypeName(dst.dtype)),
                                    shapeText(dst.local_shape),
                                    toHost ? "; a copy to the host keeps shape and type"
                                           : "; a copy to the device keeps the shape"));
  }
  if (in.attrs.bytes && *in.attrs.bytes != dst.bytes) {
    return error(path + ".attrs.bytes",
                 absl::StrCat("is ", *in.attrs.bytes, " but the copy moves ", dst.bytes,
                              " bytes (", dst.name, ")"));
  }
  return absl::OkStatus();
}

// The runtime frees a buffer after the last instruction of its `live`
// interval, so a wrong interval would free memory still in use.
absl::Status Checker::checkLifetimes(const Program& program) const {
  const std::vector<Lifetime> expected = computeLifetimes(plan_, program);
  for (size_t id = 0; id < expected.size(); ++id) {
    // With several stages, a buffer belongs to the one program that uses it.
    if (plan_.programs.size() > 1 && expected[id] == Lifetime{}) continue;
    const Lifetime& live = plan_.buffers[id].live;
    if (live != expected[id]) {
      return error(absl::StrCat("$.buffers[", id, "].live"),
                   absl::StrCat("is [", live.first, ", ", live.last, "] but the instructions hold ",
                                plan_.buffers[id].name, " over [", expected[id].first, ", ",
                                expected[id].last, "]; re-plan with this build's //tools:plan"));
    }
  }
  return absl::OkStatus();
}

std::string Checker::pathOf(const Program& program, const Instruction& in) const {
  const size_t p = &program - plan_.programs.data();
  for (size_t b = 0; b < program.blocks.size(); ++b) {
    if (program.blocks[b].name == in.block) {
      return absl::StrCat("$.programs[", p, "].blocks[", b, "].instructions[", in.position, "]");
    }
  }
  return absl::StrCat("$.programs[", p, "]");
}

#undef LOOM_RETURN_IF_ERROR

}  // namespace

absl::Status checkPlan(const Plan& plan) { return Checker(plan).run(); }

absl::Status checkPlanForJob(const Plan& plan, int64_t world_size) {
  if (plan.worldSize() != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        plan.source, ": $.mesh: the plan is for ", plan.worldSize(), " ranks (mesh ",
        plan.mesh.toString(), ") but the job has ", world_size, "; start it with --nproc=",
        plan.worldSize(), " or re-plan with --mesh for ", world_size, " ranks"));
  }
  return absl::OkStatus();
}

}  // namespace loom::plan
