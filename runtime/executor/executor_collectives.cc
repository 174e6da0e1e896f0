// The binders of the collectives and of dist.wait. Everything about a
// collective that does not change from step to step (its group, the types
// on the wire, its shapes and its route) is settled once at bind time, in a
// CollectiveCall; each step then issues it through its route, one small
// function per way of running it.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/shard_math.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"
#include "plan/op_table.h"

namespace loom::runtime {
namespace {

using WorkOr = absl::StatusOr<std::shared_ptr<comm::Work>>;

}  // namespace

absl::Status Executor::bindWait(Site& site) {
  const plan::Instruction& in = site.in;
  const auto& [o, r] = site.io();
  if (absl::Status st = site.need(1, 1); !st.ok()) return st;
  const std::string handle = in.attrs.async_handle;
  if (copy_handles_.count(handle)) return bindCopyWait(site);
  site.bound.allocates_results = false;
  site.bound.body = [=, this](int64_t step) -> absl::Status {
    auto it = pending_.find(handle);
    if (it == pending_.end()) {
      return absl::InternalError(absl::StrCat(in.where(), ": '", handle, "' was not started"));
    }
    std::shared_ptr<Pending> p = std::move(it->second);
    pending_.erase(it);
    const double t0 = TraceRecorder::nowUs();
    absl::Status s = kernels_->await(*p->work, options_.timeout);
    const double t1 = TraceRecorder::nowUs();
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("step ", step, ", ", in.where(), " (", handle,
                                                 "): ", s.message()));
    }
    traceWait(in, step, p->index, p->collective, p->axes, t0, t1);
    if (p->peer >= 0) traceTransferBubble(in, *p, step, t0, t1);
    if (p->finish) {
      if (absl::Status d = defineLike(r[0], o[0]); !d.ok()) return d;
      if (absl::Status d = p->finish(ref(r[0])); !d.ok()) return d;
    } else {
      alias(r[0], o[0]);
    }
    for (void* block : p->staging) allocator_->release(block);
    return absl::OkStatus();
  };
  return absl::OkStatus();
}

// Types: the operand's (E), the wire's (W: what the engine moves), the
// accumulation's (A) and the result's (R, W or A). E != W converts first; a
// sum accumulated wider than the wire is exchanged with an all-to-all and
// added by sumChunks, so its accumulation is the plan's on every backend and
// device, in rank order.
absl::StatusOr<Executor::CollectiveCall> Executor::parseCollective(Site& site) {
  const plan::Instruction& in = site.in;
  if (absl::Status st = site.need(1, 1); !st.ok()) return st;
  CollectiveCall c;
  c.in = &in;
  c.operand = in.operands[0];
  c.result = in.results[0];
  c.kind = plan::collectiveKindName(in.info->collective);
  const std::vector<std::string>& axes = in.attrs.mesh_axes;
  absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> group = groups_->groupFor(axes);
  if (!group.ok()) return site.fail(std::string(group.status().message()));
  c.group = *group;
  c.g = c.group->size();
  c.operand_type = plan_.buffers[c.operand].dtype;
  c.result_type = plan_.buffers[c.result].dtype;
  c.wire = in.attrs.wire_type.value_or(c.operand_type);
  c.accum = in.attrs.accum_type.value_or(c.wire);
  const std::string wireName(comm::dtypeName(c.wire));
  const std::string accumName(comm::dtypeName(c.accum));
  if (!runtimeDtype(c.wire) || !runtimeDtype(c.accum)) {
    return site.fail(absl::StrCat("wire ", wireName, " / accumulation ", accumName, ": the ",
                                  kernels_->name(),
                                  " runtime moves and reduces f32, bf16 and i32"));
  }
  if ((c.operand_type == comm::DType::kInt32) != (c.wire == comm::DType::kInt32)) {
    return site.fail(absl::StrCat("a ", std::string(comm::dtypeName(c.operand_type)),
                                  " operand cannot travel as ", wireName));
  }
  c.async = in.info->async_start;
  c.padded = in.attrs.padded;
  c.in_shape = shape(c.operand);
  c.out_shape = shape(c.result);
  c.in_count = product(c.in_shape);
  c.out_count = product(c.out_shape);
  c.reduce = in.attrs.reduction.value_or(comm::ReduceOp::kSum);
  const bool reduction = in.attrs.reduction.has_value();
  if (c.result_type != c.wire && !(reduction && c.result_type == c.accum)) {
    return site.fail(absl::StrCat("the result is ", std::string(comm::dtypeName(c.result_type)),
                                  "; a ", c.kind, " with wire ", wireName, " and accumulation ",
                                  accumName, " delivers the wire type",
                                  reduction ? " or the accumulation type" : ""));
  }
  // Max and min are exact in any type; sums and averages accumulated wider
  // than the wire take the exchange-and-add path.
  c.exact = reduction && comm::dtypeSize(c.accum) > comm::dtypeSize(c.wire) &&
            (c.reduce == comm::ReduceOp::kSum || c.reduce == comm::ReduceOp::kAvg) && c.g > 1;
  if (c.exact && c.accum != comm::DType::kFloat32) {
    return site.fail(absl::StrCat("accumulation ", accumName,
                                  " wider than the wire: the runtime accumulates in f32"));
  }
  if (absl::Status st = order_->checkCollective(c.operand_type, c.wire); !st.ok()) {
    return site.fail(std::string(st.message()));
  }
  if (absl::Status st = checkCollectiveShapes(site, c); !st.ok()) return st;
  c.bytes = in.attrs.bytes.value_or(0);
  c.axes = absl::StrJoin(axes, "+");
  c.track = absl::StrCat("comm:", c.group->name());
  c.handle = c.async ? in.attrs.async_handle : absl::StrCat("sync#", site.position);
  return c;
}

absl::Status Executor::checkCollectiveShapes(Site& site, CollectiveCall& c) {
  const std::vector<int64_t>& in = c.in_shape;
  const std::vector<int64_t>& out = c.out_shape;
  const plan::Attrs& attrs = site.in.attrs;
  c.dim = attrs.gather_dim.value_or(attrs.scatter_dim.value_or(attrs.split_dim.value_or(0)));
  c.concat_dim = attrs.concat_dim.value_or(0);
  const int64_t dim = c.dim;
  const int64_t rank = static_cast<int64_t>(in.size());
  if (c.kind != "all_reduce" && (dim < 0 || dim >= rank || c.concat_dim < 0 ||
                                 c.concat_dim >= rank || out.size() != in.size())) {
    return site.fail(absl::StrCat("dims ", dim, " and ", c.concat_dim, " do not fit ",
                                  shapeText(in), " -> ", shapeText(out)));
  }
  if (c.kind == "all_gather") {
    const int64_t want = c.padded ? out[dim] : in[dim] * c.g;
    if (mesh::shardSize(out[dim], c.g) != in[dim] || out[dim] != want) {
      return site.fail(absl::StrCat("gathering ", shapeText(in), " over ", c.g, " ranks along dim ",
                                    dim, " cannot give ", shapeText(out)));
    }
  } else if (c.kind == "reduce_scatter") {
    if (mesh::shardSize(in[dim], c.g) != out[dim]) {
      return site.fail(absl::StrCat("scattering ", shapeText(in), " over ", c.g,
                                    " ranks along dim ", dim, " cannot give ", shapeText(out)));
    }
  } else if (c.kind == "all_to_all") {
    std::vector<int64_t> want = in;
    want[dim] /= c.g;
    want[c.concat_dim] *= c.g;
    if (in[dim] % c.g != 0 || out != want) {
      return site.fail(absl::StrCat("an all-to-all of ", shapeText(in), " over ", c.g,
                                    " ranks from dim ", dim, " to dim ", c.concat_dim,
                                    " cannot give ", shapeText(out),
                                    " (the split dim must divide by the group)"));
    }
  } else if (c.kind != "all_reduce" || in != out) {
    return site.fail(absl::StrCat("unsupported collective kind '", c.kind, "'"));
  }
  return absl::OkStatus();
}

absl::Status Executor::bindCollective(Site& site) {
  absl::StatusOr<CollectiveCall> call = parseCollective(site);
  if (!call.ok()) return call.status();
  Launch launch = nullptr;
  if (call->kind == "all_reduce") {
    launch = call->exact ? &Executor::launchExactAllReduce : &Executor::launchAllReduce;
  } else if (call->kind == "all_gather") {
    launch = &Executor::launchAllGather;
  } else if (call->kind == "all_to_all") {
    launch = &Executor::launchAllToAll;
  } else {
    launch = call->exact ? &Executor::launchExactReduceScatter : &Executor::launchReduceScatter;
  }
  site.bound.body = [this, c = *std::move(call), launch](int64_t step) {
    return issueCollective(c, launch, step);
  };
  return absl::OkStatus();
}

comm::Tensor Executor::CollectiveRun::tensor(Ref data, int64_t count) const {
  return comm::Tensor(data.data, data.dtype, {count}, device);
}

absl::StatusOr<Ref> Executor::stage(CollectiveRun& run, comm::DType t, int64_t count) {
  const size_t size = count * comm::dtypeSize(t);
  void* block = allocator_->allocate(size);
  if (block == nullptr) return outOfMemory(size, run.call.in->where());
  run.pending->staging.push_back(block);
  return Ref{block, t};
}

absl::StatusOr<Ref> Executor::engineResult(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  if (c.result_type == c.wire) return run.dst;
  absl::StatusOr<Ref> staging = stage(run, c.wire, c.out_count);
  if (!staging.ok()) return staging.status();
  const Ref block = *staging;
  const int64_t count = c.out_count;
  run.pending->finish = [=, this](Ref out) { return kernels_->convert(block, out, count); };
  return block;
}

// Deterministic mode, an operand holding per-row partial sums: gather every
// rank's rows (and which global rows they are) instead of summing them; a
// reduce-scatter keeps this rank's part of each row.
WorkOr Executor::launchStacked(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  const Stack& mine = stacks_[c.operand];
  const int64_t rowsIn = mine.rows, g = c.g;
  std::vector<int64_t> index(rowsIn * g);
  WorkOr indexWork = c.group->allGatherIntoTensor(
      comm::Tensor(index.data(), comm::DType::kInt64, {rowsIn * g}),
      comm::Tensor(const_cast<int64_t*>(mine.index.data()), comm::DType::kInt64, {rowsIn}));
  if (!indexWork.ok()) return indexWork.status();
  if (absl::Status s = (*indexWork)->wait(options_.timeout); !s.ok()) return s;
  if (c.kind == "all_gather" || c.kind == "all_to_all" ||
      (c.kind == "reduce_scatter" && (c.dim != 0 || c.padded))) {
    return absl::UnimplementedError(
        absl::StrCat(c.in->where(),
                     ": deterministic mode covers all-reduces and dim-0 reduce-scatters of "
                     "gradients; this plan needs ",
                     c.kind, " along dim ", c.dim));
  }
  Stack gathered{rowsIn * g, index, mine.mean};
  if (absl::Status s = defineStacked(c.result, gathered); !s.ok()) return s;
  run.dst = ref(c.result);
  if (c.kind == "all_reduce") {
    return c.group->allGatherIntoTensor(run.tensor(run.dst, rowsIn * g * c.in_count),
                                        run.tensor(run.src, rowsIn * c.in_count));
  }
  absl::StatusOr<Ref> staging = stage(run, c.wire, g * rowsIn * c.in_count);
  if (!staging.ok()) return staging.status();
  WorkOr work = c.group->allGatherIntoTensor(run.tensor(*staging, g * rowsIn * c.in_count),
                                             run.tensor(run.src, rowsIn * c.in_count));
  const int64_t part = c.group->rank(), inCount = c.in_count, outCount = c.out_count;
  const size_t we = comm::dtypeSize(c.wire);
  const Ref from = *staging;
  run.pending->finish = [=, this](Ref out) {
    return kernels_->copy2D(out.data, outCount * we, from.at(part * outCount).data, inCount * we,
                            outCount * we, g * rowsIn);
  };
  return work;
}

// Rank q adds up everybody's segment q (padded to equal segments), then the
// sums are gathered in the result's type. Without padding the operand is
// sent as it is and the sums gathered into the result.
WorkOr Executor::launchExactAllReduce(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  const int64_t g = c.g, inCount = c.in_count, outCount = c.out_count;
  const size_t we = comm::dtypeSize(c.wire);
  const int64_t segment = mesh::shardSize(inCount, g);
  const bool pad = g * segment != inCount;
  Ref send = run.src;
  if (pad) {
    absl::StatusOr<Ref> staging = stage(run, c.wire, g * segment);
    if (!staging.ok()) return staging.status();
    send = *staging;
    absl::Status s = kernels_->copy(send.data, run.src.data, inCount * we);
    s.Update(kernels_->zero2D(send.at(inCount).data, 0, (g * segment - inCount) * we, 1));
    if (!s.ok()) return s;
  }
  absl::StatusOr<Ref> recv = stage(run, c.wire, g * segment);
  absl::StatusOr<Ref> sum = stage(run, c.result_type, segment);
  absl::StatusOr<Ref> all =
      pad ? stage(run, c.result_type, g * segment) : absl::StatusOr<Ref>(Ref{});
  for (const absl::StatusOr<Ref>* block : {&recv, &sum, &all}) {
    if (!block->ok()) return block->status();
  }
  WorkOr work =
      c.group->allToAllSingle(run.tensor(*recv, g * segment), run.tensor(send, g * segment));
  const bool average = c.reduce == comm::ReduceOp::kAvg;
  const Ref received = *recv, mine = *sum, padded = *all;
  const comm::Device device = run.device;
  std::shared_ptr<comm::ProcessGroup> pg = c.group;
  const std::string where = c.in->where();
  run.pending->finish = [=, this](Ref out) -> absl::Status {
    absl::Status s = kernels_->sumChunks(received, g, segment, average, mine);
    if (!s.ok()) return s;
    const Ref gathered = pad ? padded : out;
    WorkOr gather =
        pg->allGatherIntoTensor(comm::Tensor(gathered.data, gathered.dtype, {g * segment}, device),
                                comm::Tensor(mine.data, mine.dtype, {segment}, device));
    if (!gather.ok()) return gather.status();
    step_works_.emplace_back(absl::StrCat(where, " (gathering the sums)"), *gather);
    if (s = kernels_->await(**gather, options_.timeout); !s.ok() || !pad) return s;
    return kernels_->copy(out.data, gathered.data, outCount * comm::dtypeSize(out.dtype));
  };
  return work;
}

WorkOr Executor::launchAllReduce(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  absl::StatusOr<Ref> target = engineResult(run);
  if (!target.ok()) return target.status();
  const size_t we = comm::dtypeSize(c.wire);
  if (absl::Status s = kernels_->copy(target->data, run.src.data, c.in_count * we); !s.ok())
    return s;
  return c.group->allReduce(run.tensor(*target, c.out_count), {.op = c.reduce});
}

WorkOr Executor::launchAllGather(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  if (c.dim == 0 && !c.padded) {
    return c.group->allGatherIntoTensor(run.tensor(run.dst, c.out_count),
                                        run.tensor(run.src, c.in_count));
  }
  // Gather rank-major, then lay the pieces side by side along dim (dropping
  // the padded tail) at the wait.
  absl::StatusOr<Ref> staging = stage(run, c.wire, c.g * c.in_count);
  if (!staging.ok()) return staging.status();
  WorkOr work = c.group->allGatherIntoTensor(run.tensor(*staging, c.g * c.in_count),
                                             run.tensor(run.src, c.in_count));
  const int64_t rows = c.in_shape[c.dim], g = c.g, inCount = c.in_count, dim = c.dim;
  const std::vector<int64_t> outShape = c.out_shape;
  const Ref from = *staging;
  run.pending->finish = [=, this](Ref out) {
    absl::Status s;
    for (int64_t q = 0; q < g; ++q) {
      s.Update(placeDimSlice(*kernels_, from.at(q * inCount), rows, out, outShape, dim, q * rows));
    }
    return s;
  };
  return work;
}

// Chunk q of the split dim goes to rank q; what rank q sends lands at
// block q of the concat dim. Both sides are packed rank-major in staging.
WorkOr Executor::launchAllToAll(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  const int64_t g = c.g, chunk = c.in_count / g, rows = c.in_shape[c.dim];
  const int64_t part = rows / g;
  absl::StatusOr<Ref> send = stage(run, c.wire, c.in_count);
  if (!send.ok()) return send.status();
  absl::StatusOr<Ref> recv = stage(run, c.wire, c.in_count);
  if (!recv.ok()) return recv.status();
  for (int64_t q = 0; q < g; ++q) {
    absl::Status s =
        copyDimSlice(*kernels_, run.src, c.in_shape, c.dim, q * part, part, send->at(q * chunk));
    if (!s.ok()) return s;
  }
  WorkOr work =
      c.group->allToAllSingle(run.tensor(*recv, c.in_count), run.tensor(*send, c.in_count));
  // A received chunk is the operand's shape with the split dim cut to
  // `part`, so its extent along the concat dim is `part` or the operand's.
  const int64_t concat = c.concat_dim, block = concat == c.dim ? part : c.in_shape[concat];
  const std::vector<int64_t> outShape = c.out_shape;
  const Ref from = *recv;
  run.pending->finish = [=, this](Ref out) {
    absl::Status s;
    for (int64_t q = 0; q < g; ++q) {
      s.Update(
          placeDimSlice(*kernels_, from.at(q * chunk), block, out, outShape, concat, q * block));
    }
    return s;
  };
  return work;
}

// The reduce-scatter's input as g equal segments, segment q holding rank
// q's rows of dim (zero-padded): the operand itself for an unpadded dim 0.
absl::StatusOr<Ref> Executor::scatterSegments(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  if (c.dim == 0 && !c.padded) return run.src;
  absl::StatusOr<Ref> staging = stage(run, c.wire, c.g * c.out_count);
  if (!staging.ok()) return staging.status();
  const int64_t rows = c.out_shape[c.dim];
  for (int64_t q = 0; q < c.g; ++q) {
    absl::Status s = copyDimSlice(*kernels_, run.src, c.in_shape, c.dim, q * rows, rows,
                                  staging->at(q * c.out_count));
    if (!s.ok()) return s;
  }
  return *staging;
}

WorkOr Executor::launchReduceScatter(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  absl::StatusOr<Ref> segments = scatterSegments(run);
  if (!segments.ok()) return segments.status();
  absl::StatusOr<Ref> target = engineResult(run);
  if (!target.ok()) return target.status();
  return c.group->reduceScatterTensor(run.tensor(*target, c.out_count),
                                      run.tensor(*segments, c.g * c.out_count), {.op = c.reduce});
}

// A sum accumulated wider than the wire: exchange the segments, then add
// them in rank order in f32.
WorkOr Executor::launchExactReduceScatter(CollectiveRun& run) {
  const CollectiveCall& c = run.call;
  absl::StatusOr<Ref> segments = scatterSegments(run);
  if (!segments.ok()) return segments.status();
  absl::StatusOr<Ref> recv = stage(run, c.wire, c.g * c.out_count);
  if (!recv.ok()) return recv.status();
  WorkOr work = c.group->allToAllSingle(run.tensor(*recv, c.g * c.out_count),
                                        run.tensor(*segments, c.g * c.out_count));
  const bool average = c.reduce == comm::ReduceOp::kAvg;
  const Ref received = *recv;
  const int64_t g = c.g, outCount = c.out_count;
  run.pending->finish = [=, this](Ref out) {
    return kernels_->sumChunks(received, g, outCount, average, out);
  };
  return work;
}

absl::Status Executor::issueCollective(const CollectiveCall& c, Launch launch, int64_t step) {
  auto p = std::make_shared<Pending>();
  p->collective = c.kind;
  p->axes = c.axes;
  p->index = c.in->index;
  p->started = c.in->where();
  p->issued_us = TraceRecorder::nowUs();
  CollectiveRun run{c, p, ref(c.operand), ref(c.result), kernels_->device()};
  if (order_->convertsToWire() && c.operand_type != c.wire) {
    absl::StatusOr<Ref> wire = stage(run, c.wire, c.in_count);
    if (!wire.ok()) return wire.status();
    if (absl::Status s = kernels_->convert(run.src, *wire, c.in_count); !s.ok()) return s;
    run.src = *wire;
  }
  if (stacks_[c.operand].rows > 0) launch = &Executor::launchStacked;
  WorkOr work = (this->*launch)(run);
  const plan::Instruction& in = *c.in;
  if (!work.ok()) {
    return absl::Status(work.status().code(), absl::StrCat("step ", step, ", ", in.where(), ": ",
                                                           work.status().message()));
  }
  p->work = *work;
  comm_bytes_ += c.bytes;
  step_works_.emplace_back(in.where(), p->work);
  if (options_.trace) traceCollective(c, *p, step);
  // A blocking collective is a start and a wait in one. Without overlap an
  // async one is waited at once and its dist.wait later finds it done.
  if (c.async && !options_.overlap) {
    const double t0 = TraceRecorder::nowUs();
    absl::Status s = kernels_->await(*p->work, options_.timeout);
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("step ", step, ", ", in.where(), ": ", s.message()));
    }
    traceWait(in, step, in.index, c.kind, c.axes, t0, TraceRecorder::nowUs());
  }
  if (!c.async) {
    const double t0 = TraceRecorder::nowUs();
    absl::Status s = kernels_->await(*p->work, options_.timeout);
    wait_us_ += TraceRecorder::nowUs() - t0;
    if (s.ok() && p->finish) s = p->finish(run.dst);
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("step ", step, ", ", in.where(), ": ", s.message()));
    }
    for (void* block : p->staging) allocator_->release(block);
    return absl::OkStatus();
  }
  pending_[c.handle] = std::move(p);
  return absl::OkStatus();
}

// The collective's span on its group's track, from issue to completion
// (recorded on the group's thread when the Work completes).
void Executor::traceCollective(const CollectiveCall& c, Pending& p, int64_t step) {
  traceTransfer(*c.in, p, step, c.track, c.bytes);
}

void Executor::traceTransfer(const plan::Instruction& in, Pending& p, int64_t step,
                             const std::string& track, int64_t bytes) {
  const std::string phase(plan::phaseName(in.phase));
  const int64_t index = in.index;
  const std::string block = in.block;
  const int64_t micro = microBatchOf(in);
  const double issued = p.issued_us;
  const std::string kind = p.collective, axes = p.axes;
  ++callbacks_outstanding_;
  p.work->onCompletion([=, this](const absl::Status&) {
    trace_.add(TraceEvent{.name = kind,
                          .track = track,
                          .phase = phase,
                          .step = step,
                          .index = index,
                          .block = block,
                          .micro_batch = micro,
                          .start_us = issued,
                          .duration_us = TraceRecorder::nowUs() - issued,
                          .collective = kind,
                          .axes = axes,
                          .bytes = bytes});
    --callbacks_outstanding_;
  });
}

}  // namespace loom::runtime
