// The binders of the buffer ops (dist.bucket, dist.unbucket, dist.slice,
// dist.free) and of the optimizer step (on host buffers:
// executor_offload.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mesh/shard_math.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime {

absl::Status Executor::bindBucket(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  const bool pack = in.op == "dist.bucket";
  const std::vector<int64_t>& entries = pack ? o : r;
  const int64_t flat = pack ? r.at(0) : o.at(0);
  if ((pack ? r.size() : o.size()) != 1) return site.fail("one bucket buffer expected");
  const int64_t chunks = in.attrs.chunks.value_or(1);
  const std::vector<int64_t>& offsets = in.attrs.offsets;
  const std::vector<int64_t> splitDims =
      in.attrs.split_dims.empty() ? std::vector<int64_t>(entries.size(), 0) : in.attrs.split_dims;
  if (offsets.size() != entries.size() || splitDims.size() != entries.size() || chunks < 1 ||
      numel(flat) % chunks) {
    return site.fail("offsets/split_dims/chunks do not fit the entries");
  }
  const int64_t segment = numel(flat) / chunks;
  const comm::DType type = plan_.buffers[flat].dtype;
  for (int64_t id : entries) {
    if (plan_.buffers[id].dtype != type) {
      return site.fail(absl::StrCat(plan_.buffers[id].name, " is ",
                                    std::string(comm::dtypeName(plan_.buffers[id].dtype)),
                                    " but its bucket is ", std::string(comm::dtypeName(type))));
    }
  }
  const size_t elem = comm::dtypeSize(type);
  // padded: parts take ceil(n / chunks) rows of the split dim, the rows
  // past the entry's end zero in the bucket and dropped when unbucketing.
  const bool padded = in.attrs.padded;
  struct Part {
    int64_t id, outer, n, tail, offset, count, rows;
  };
  std::vector<Part> parts;
  for (size_t k = 0; k < entries.size(); ++k) {
    const std::vector<int64_t>& s = shape(entries[k]);
    const int64_t d = s.empty() ? 0 : splitDims[k];
    Part part{entries[k],
              product(s, 0, d),
              s.empty() ? 1 : s[d],
              product(s, d + 1),
              offsets[k],
              product(s),
              0};
    part.rows = padded ? mesh::shardSize(part.n, chunks) : part.n / chunks;
    if ((!padded && part.n % chunks) ||
        part.offset + part.outer * part.rows * part.tail > segment) {
      return site.fail(absl::StrCat("entry ", k, " ", shapeText(s), " does not fit its segment"));
    }
    parts.push_back(part);
  }
  order_->carryRows(site.bound);
  const int64_t flatCount = numel(flat);
  site.bound.body = [=, this](int64_t) {
    const int64_t stackRows = std::max<int64_t>(1, stacks_[flat].rows);
    absl::Status s;
    for (int64_t row = 0; row < stackRows; ++row) {
      const Ref buffer = ref(flat).at(row * flatCount);
      for (const Part& p : parts) {
        // Chunk c of an entry is `real` rows of its split dim in each of
        // its `outer` slices, laid `rows` apart in segment c.
        const Ref entry = ref(p.id).at(row * p.count);
        const int64_t rows = p.rows;
        const size_t entryPitch = p.n * p.tail * elem, bucketPitch = rows * p.tail * elem;
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t real = std::clamp<int64_t>(p.n - c * rows, 0, rows);
          void* a = entry.at(c * rows * p.tail).data;
          const Ref b = buffer.at(c * segment + p.offset);
          const size_t width = real * p.tail * elem;
          if (!pack) {
            s.Update(kernels_->copy2D(a, entryPitch, b.data, bucketPitch, width, p.outer));
            continue;
          }
          s.Update(kernels_->copy2D(b.data, bucketPitch, a, entryPitch, width, p.outer));
          if (real < rows) {
            s.Update(kernels_->zero2D(b.at(real * p.tail).data, bucketPitch,
                                      (rows - real) * p.tail * elem, p.outer));
          }
        }
      }
    }
    return s;
  };
  return absl::OkStatus();
}

absl::Status Executor::bindSlice(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(1, 1); !st.ok()) return st;
  if (plan_.buffers[o[0]].dtype != plan_.buffers[r[0]].dtype)
    return site.fail("a slice keeps its dtype");
  const int64_t dim = *in.attrs.slice_dim;
  int64_t index = 0;
  for (const std::string& axis : in.attrs.mesh_axes) {
    absl::StatusOr<int64_t> a = plan_.mesh.axisIndex(axis);
    if (!a.ok()) return site.fail(std::string(a.status().message()));
    index = index * plan_.mesh.shape()[*a] + coords_[*a];
  }
  const std::vector<int64_t> in_shape = shape(o[0]);
  const int64_t rows = shape(r[0])[dim];
  site.bound.body = [=, this](int64_t) {
    return copyDimSlice(*kernels_, ref(o[0]), in_shape, dim, index * rows, rows, ref(r[0]));
  };
  return absl::OkStatus();
}

absl::Status Executor::bindFree(Site& site) {
  const auto& [o, r] = site.io();
  if (o.size() != 1 || !r.empty()) return site.fail("dist.free takes one buffer");
  site.bound.body = [](int64_t) { return absl::OkStatus(); };
  return absl::OkStatus();
}

// The first micro-step defines the sum (run() allocates it; later
// micro-steps find it defined, as it is carried), the others add to it.
absl::Status Executor::bindAccumulate(Site& site) {
  if (absl::Status s = site.need(1, 1); !s.ok()) return s;
  const int64_t value = site.in.operands[0];
  const int64_t sum = site.in.results[0];
  if (plan_.buffers[value].dtype != plan_.buffers[sum].dtype || numel(value) != numel(sum)) {
    return site.fail("the sum and the value it adds differ in type or size");
  }
  const int64_t n = numel(value);
  const size_t bytes = static_cast<size_t>(plan_.buffers[value].bytes);
  site.bound.body = [=, this](int64_t) {
    if (micro_ == 0) return kernels_->copy(bufferData(sum), bufferData(value), bytes);
    return kernels_->add(ref(sum), ref(value), ref(sum), n);
  };
  return absl::OkStatus();
}

absl::Status Executor::bindOptimizerStep(Site& site) {
  const plan::Instruction& in = site.in;
  const std::vector<int64_t>& o = site.in.operands;
  if (o.size() != 4 && o.size() != 5) {
    return site.fail(
        "expected param, grad, exp_avg, exp_avg_sq and, for non-f32 params, an f32 master copy");
  }
  const int64_t n = numel(o[0]);
  for (int64_t id : o) {
    if (numel(id) != n) return site.fail("param, grad and states differ in size");
  }
  const bool master = o.size() == 5;
  constexpr char kStates[] = "AdamW keeps its states and master copies in f32";
  absl::Status states =
      master ? site.needF32({o[2], o[3], o[4]}, kStates) : site.needF32({o[2], o[3]}, kStates);
  if (!states.ok()) return states;
  if (!master && plan_.buffers[o[0]].dtype != comm::DType::kFloat32) {
    return site.fail(
        "a bf16 parameter needs an f32 master copy (operand 5); re-plan with the current planner");
  }
  optim::AdamWConfig config;
  config.lr = options_.learning_rate > 0 ? options_.learning_rate : *in.attrs.lr;
  base_lr_ = config.lr;
  config.beta1 = *in.attrs.beta1;
  config.beta2 = *in.attrs.beta2;
  config.eps = *in.attrs.eps;
  config.weight_decay = *in.attrs.weight_decay;
  if (plan_.buffers[o[0]].onHost()) return bindHostOptimizerStep(site, config);
  site.bound.allocates_results = false;
  site.bound.body = [=, this](int64_t step) {
    optim::AdamWConfig scheduled = config;
    scheduled.lr = config.lr * lr_factor_;
    return kernels_->adamw(scheduled, step, ref(o[0]), ref(o[1]), f32(o[2]), f32(o[3]),
                           master ? f32(o[4]) : nullptr, n, clip_coefficient_);
  };
  return absl::OkStatus();
}

}  // namespace loom::runtime
