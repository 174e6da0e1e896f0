// The plan's small vocabulary (plan.h): role, phase and placement names,
// buffer sizes, the instruction order of a program, and which program a
// rank runs.
#include "plan/plan.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace loom::plan {

const char* roleName(BufferRole role) {
  switch (role) {
    case BufferRole::kParam:
      return "param";
    case BufferRole::kGrad:
      return "grad";
    case BufferRole::kOptimizerState:
      return "optimizer_state";
    case BufferRole::kActivation:
      return "activation";
    case BufferRole::kGathered:
      return "gathered";
  }
  return "?";
}

absl::StatusOr<BufferRole> roleFromName(std::string_view name) {
  for (int r = 0; r < kNumRoles; ++r) {
    if (roleName(static_cast<BufferRole>(r)) == name) return static_cast<BufferRole>(r);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role '", std::string(name),
                   "' (expected param, grad, optimizer_state, activation or gathered)"));
}

const char* memorySpaceName(MemorySpace space) {
  return space == MemorySpace::kHost ? "host" : "device";
}

absl::StatusOr<MemorySpace> memorySpaceFromName(std::string_view name) {
  for (MemorySpace space : {MemorySpace::kDevice, MemorySpace::kHost}) {
    if (memorySpaceName(space) == name) return space;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("is '", std::string(name), "'; expected device or host"));
}

const char* phaseName(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer";
  }
  return "?";
}

const char* microStepName(MicroStep when) {
  switch (when) {
    case MicroStep::kFirst:
      return "first";
    case MicroStep::kLast:
      return "last";
    case MicroStep::kEvery:
      return "every";
  }
  return "?";
}

absl::StatusOr<MicroStep> microStepFromName(std::string_view name) {
  for (MicroStep when : {MicroStep::kEvery, MicroStep::kFirst, MicroStep::kLast}) {
    if (microStepName(when) == name) return when;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("is '", std::string(name), "'; expected every, first or last"));
}

std::string AxisPlacement::toString() const {
  switch (kind) {
    case Kind::kReplicate:
      return "replicate";
    case Kind::kShard:
      return absl::StrCat("shard(", dim, padded ? ",padded" : "", ")");
    case Kind::kPartial:
      return absl::StrCat("partial(", std::string(comm::reduceOpName(reduction)), ")");
  }
  return "?";
}

absl::StatusOr<AxisPlacement> AxisPlacement::parse(std::string_view text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad placement '", std::string(text),
        "' (expected replicate, shard(D), shard(D,padded) or partial(sum|avg|max|min))"));
  };
  AxisPlacement p;
  if (text == "replicate") return p;
  auto inner = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (!text.starts_with(prefix) || !text.ends_with(')')) return std::nullopt;
    return text.substr(prefix.size(), text.size() - prefix.size() - 1);
  };
  if (std::optional<std::string_view> body = inner("shard(")) {
    p.kind = Kind::kShard;
    std::string_view digits = *body;
    if (const size_t comma = digits.find(','); comma != std::string_view::npos) {
      if (digits.substr(comma + 1) != "padded") return bad();
      p.padded = true;
      digits = digits.substr(0, comma);
    }
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos) {
      return bad();
    }
    p.dim = std::stoll(std::string(digits));
    return p;
  }
  if (std::optional<std::string_view> body = inner("partial(")) {
    for (comm::ReduceOp op :
         {comm::ReduceOp::kSum, comm::ReduceOp::kAvg, comm::ReduceOp::kMax, comm::ReduceOp::kMin}) {
      if (*body == comm::reduceOpName(op)) {
        p.kind = Kind::kPartial;
        p.reduction = op;
        return p;
      }
    }
  }
  return bad();
}

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t d : local_shape) n *= d;
  return n;
}

std::string Instruction::where() const {
  return absl::StrCat("blocks.", block, "[", position, "] (", op, ")");
}

std::vector<size_t> Program::blockOrder() const {
  std::vector<size_t> out;
  for (const ScheduleEntry& entry : schedule) {
    const Block* b = block(entry.block);
    if (b == nullptr) continue;
    const size_t index = static_cast<size_t>(b - blocks.data());
    if (std::find(out.begin(), out.end(), index) == out.end()) out.push_back(index);
  }
  return out;
}

std::vector<const Instruction*> Program::instructions() const {
  std::vector<const Instruction*> out;
  for (size_t b : blockOrder()) {
    for (const Instruction& in : blocks[b].instructions) out.push_back(&in);
  }
  return out;
}

void Program::assignOrder() {
  int64_t order = 0;
  for (size_t b : blockOrder()) {
    for (Instruction& in : blocks[b].instructions) in.order = order++;
  }
}

const Block* Program::block(std::string_view name) const {
  for (const Block& b : blocks) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

mesh::DeviceMesh singleRankMesh() { return *mesh::DeviceMesh::create({1}, {"world"}); }

const Program& programFor(const Plan& plan, const std::vector<int64_t>& coords) {
  for (size_t a = 0; a < plan.strategies.size() && a < coords.size(); ++a) {
    if (plan.strategies[a] != "pp") continue;
    for (const Program& program : plan.programs) {
      if (program.stage == coords[a]) return program;
    }
  }
  return plan.programs.front();
}

}  // namespace loom::plan
