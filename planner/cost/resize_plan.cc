// Re-sizing a plan for other data-parallel degrees (see resize_plan.h).
#include "planner/cost/resize_plan.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plan/lifetimes.h"

namespace loom::planner::cost {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

class Resizer {
 public:
  Resizer(const plan::Plan& plan, const Resize& resize, plan::Plan& out)
      : in_(plan), resize_(resize), out_(out) {}
  // `out` starts as a copy of `plan`, resized before or not.
  absl::Status run();

 private:
  absl::Status setMesh();
  // Product of the new sizes of the axes that shard dim `d`, and whether a
  // data axis is among them.
  std::pair<int64_t, bool> ways(const plan::Placement& placement, int64_t d) const;
  absl::Status resizeBuffer(plan::Buffer& b, bool batch) const;
  int64_t groupSize(const plan::Instruction& in) const;
  bool dataSharded(const plan::Placement& placement) const {
    for (size_t a = 0; a < placement.size(); ++a) {
      if (dataAxis_[a] && placement[a].kind == plan::AxisPlacement::Kind::kShard) return true;
    }
    return false;
  }
  absl::Status resizeResults(const plan::Instruction& in);
  void setShape(int64_t id, std::vector<int64_t> local);

  const plan::Plan& in_;
  const Resize& resize_;
  plan::Plan& out_;
  std::vector<bool> dataAxis_;
  // Buffer -> the instruction that reads it first (to size a gradient
  // bucket by the group of the reduce-scatter that consumes it).
  std::vector<const plan::Instruction*> firstReader_;
  // Flat bucket layouts: dist.bucket's results and the collectives and
  // waits that carry them.
  std::vector<bool> bucket_;
};

absl::Status Resizer::setMesh() {
  std::vector<int64_t> shape = in_.mesh.shape();
  const std::vector<std::string>& names = in_.mesh.axisNames();
  dataAxis_.assign(names.size(), false);
  for (size_t a = 0; a < names.size(); ++a) {
    const std::string& strategy = a < in_.strategies.size() ? in_.strategies[a] : "";
    dataAxis_[a] = strategy == "dp" || strategy == "fsdp";
  }
  for (const auto& [name, size] : resize_.axis_sizes) {
    size_t a = 0;
    while (a < names.size() && names[a] != name) ++a;
    // A pp axis shards nothing: its size is the stages', which a stage's
    // program does not depend on.
    const bool stages = a < names.size() && a < in_.strategies.size() && in_.strategies[a] == "pp";
    if (a == names.size() || !(dataAxis_[a] || stages)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot resize axis '", name,
                       "': the plan has no data-parallel or pipeline axis of that name"));
    }
    if (size < 1) return absl::InvalidArgumentError(absl::StrCat("axis ", name, " size ", size));
    shape[a] = size;
  }
  // The search re-sizes into the same scratch plan candidate after
  // candidate, often to the mesh it already has: a mesh of thousands of
  // devices is worth keeping.
  if (out_.mesh.shape() == shape && out_.mesh.axisNames() == names) return absl::OkStatus();
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::create(shape, names);
  if (!mesh.ok()) return mesh.status();
  out_.mesh = *std::move(mesh);
  return absl::OkStatus();
}

std::pair<int64_t, bool> Resizer::ways(const plan::Placement& placement, int64_t d) const {
  int64_t n = 1;
  bool data = false;
  for (size_t a = 0; a < placement.size(); ++a) {
    if (placement[a].kind != plan::AxisPlacement::Kind::kShard || placement[a].dim != d) continue;
    n *= out_.mesh.shape()[a];
    data = data || dataAxis_[a];
  }
  return {n, data};
}

void Resizer::setShape(int64_t id, std::vector<int64_t> local) {
  plan::Buffer& b = out_.buffers[id];
  b.local_shape = std::move(local);
  b.bytes = numel(b.local_shape) * static_cast<int64_t>(comm::dtypeSize(b.dtype));
}

absl::Status Resizer::resizeBuffer(plan::Buffer& b, bool batch) const {
  for (size_t d = 0; d < b.local_shape.size(); ++d) {
    const auto [n, data] = ways(b.placement, static_cast<int64_t>(d));
    if (!data) continue;
    if (batch) {
      const int64_t scaled = b.local_shape[d] * resize_.micro_batch;
      if (scaled % resize_.template_micro_batch != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(b.name, ": dim ", d, " of ", b.local_shape[d],
                         " rows does not hold whole sequences of ", "the template's micro-batch ",
                         resize_.template_micro_batch));
      }
      b.local_shape[d] = scaled / resize_.template_micro_batch;
      b.global_shape[d] = b.local_shape[d] * n;
    } else {
      b.local_shape[d] = ceilDiv(b.global_shape[d], n);
    }
  }
  b.bytes = numel(b.local_shape) * static_cast<int64_t>(comm::dtypeSize(b.dtype));
  return absl::OkStatus();
}

int64_t Resizer::groupSize(const plan::Instruction& in) const {
  int64_t g = 1;
  for (const std::string& axis : in.attrs.mesh_axes) g *= *out_.mesh.axisSize(axis);
  return g;
}

// Sizes that follow from an instruction's operands rather than from a
// buffer's own placement: buckets, gathered and scattered buckets,
// all-reduces and waits.
absl::Status Resizer::resizeResults(const plan::Instruction& in) {
  const plan::Buffer& operand = out_.buffers[in.operands.empty() ? 0 : in.operands[0]];
  if (in.op == "dist.bucket") {
    const plan::Instruction* consumer = firstReader_[in.results[0]];
    const int64_t chunks =
        in.attrs.chunks.value_or(1) > 1 && consumer &&
                consumer->info->collective == plan::CollectiveKind::kReduceScatter
            ? groupSize(*consumer)
            : 1;
    int64_t total = 0;
    for (size_t i = 0; i < in.operands.size(); ++i) {
      const std::vector<int64_t>& shape = out_.buffers[in.operands[i]].local_shape;
      const int64_t dim = i < in.attrs.split_dims.size() ? in.attrs.split_dims[i] : 0;
      const int64_t rows = shape.empty() ? 1 : shape[dim];
      total += numel(shape) / rows * ceilDiv(rows, chunks);
    }
    setShape(in.results[0], {total * chunks});
    bucket_[in.results[0]] = true;
    return absl::OkStatus();
  }
  if (in.info->family == plan::OpFamily::kWait) {
    setShape(in.results[0], operand.local_shape);
    bucket_[in.results[0]] = bucket_[in.operands[0]];
    return absl::OkStatus();
  }
  if (in.info->family != plan::OpFamily::kCollective) return absl::OkStatus();
  const bool flat = bucket_[in.operands[0]];
  bucket_[in.results[0]] = flat;
  switch (in.info->collective) {
    case plan::CollectiveKind::kAllGather:
      if (flat) setShape(in.results[0], {operand.local_shape[0] * groupSize(in)});
      break;
    case plan::CollectiveKind::kReduceScatter:
      if (flat) setShape(in.results[0], {operand.local_shape[0] / groupSize(in)});
      break;
    case plan::CollectiveKind::kAllReduce:
      setShape(in.results[0], operand.local_shape);
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

absl::Status Resizer::run() {
  if (resize_.template_micro_batch < 1 || resize_.micro_batch < 1) {
    return absl::InvalidArgumentError("micro-batches must be >= 1");
  }
  // Back to the template's sizes, the ones resizing starts from.
  for (size_t i = 0; i < in_.buffers.size(); ++i) {
    plan::Buffer& b = out_.buffers[i];
    b.global_shape = in_.buffers[i].global_shape;
    b.local_shape = in_.buffers[i].local_shape;
    b.bytes = in_.buffers[i].bytes;
  }
  if (absl::Status s = setMesh(); !s.ok()) return s;
  // Every program's instructions: a pipeline stage's buffers are its own.
  std::vector<const plan::Instruction*> order;
  for (const plan::Program& program : in_.programs) {
    const std::vector<const plan::Instruction*> instructions = program.instructions();
    order.insert(order.end(), instructions.begin(), instructions.end());
  }
  // Batch buffers: inputs, compute results, and what dist ops make of them.
  std::vector<bool> batch(out_.buffers.size(), false);
  for (int64_t id : {out_.interface.ids, out_.interface.labels, out_.interface.positions}) {
    if (id >= 0) batch[id] = true;
  }
  firstReader_.assign(out_.buffers.size(), nullptr);
  for (const plan::Instruction* in : order) {
    for (int64_t id : in->operands) {
      if (!firstReader_[id]) firstReader_[id] = in;
    }
    if (in->info->family == plan::OpFamily::kOptimizer) continue;
    for (int64_t id : in->results) {
      // A compute result of the batch split over a data axis splits its
      // batch (a weight's gradient is partial there, not split; a sum of
      // two gradient shards reads no batch), and so does a tensor received
      // from another stage; a dist op's result is what its input is.
      // (The optimizer phase receives a tied gradient's shard, no batch.)
      const bool received = in->info->family == plan::OpFamily::kPointToPoint &&
                            in->operands.empty() && in->phase != plan::Phase::kOptimizer;
      const bool computed = in->info->family == plan::OpFamily::kCompute &&
                            std::any_of(in->operands.begin(), in->operands.end(),
                                        [&](int64_t operand) { return batch[operand]; });
      batch[id] = batch[id] || (received || computed ? dataSharded(out_.buffers[id].placement)
                                                     : in->info->family != plan::OpFamily::kCompute &&
                                                           !in->operands.empty() &&
                                                           batch[in->operands[0]]);
    }
  }
  for (plan::Buffer& b : out_.buffers) {
    if (absl::Status s = resizeBuffer(b, batch[b.id]); !s.ok()) return s;
  }
  bucket_.assign(out_.buffers.size(), false);
  for (const plan::Instruction* in : order) {
    if (!in->results.empty() && batch[in->results[0]]) continue;
    if (absl::Status s = resizeResults(*in); !s.ok()) return s;
  }
  out_.predicted = {};
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<plan::Plan> resizePlan(const plan::Plan& plan, const Resize& resize) {
  plan::Plan out = plan;
  if (absl::Status s = resizePlanInto(plan, resize, out); !s.ok()) return s;
  // The old timings do not hold for the new sizes.
  for (plan::Program& program : out.programs) {
    for (plan::Block& block : program.blocks) {
      for (plan::Instruction& in : block.instructions) {
        in.start_s.reset();
        in.duration_s.reset();
      }
    }
  }
  return out;
}

absl::Status resizePlanInto(const plan::Plan& plan, const Resize& resize, plan::Plan& out) {
  if (plan.programs.empty()) return absl::InvalidArgumentError("resizing needs a program");
  if (out.buffers.size() != plan.buffers.size()) {
    return absl::InvalidArgumentError("resizing into a plan of another structure");
  }
  return Resizer(plan, resize, out).run();
}

}  // namespace loom::planner::cost
