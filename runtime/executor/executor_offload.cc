// Offload (docs/planner_offload.md): the binders of the copies between
// device memory and the host arena, of their waits, and of AdamW on host
// buffers. On the CPU a copy is a memcpy between the two arenas, done when
// it starts; on a GPU it runs on the kernel set's copy stream from and to
// pinned memory, and its wait blocks the host until it is done.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/half_float.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime {

double hostSquaredNorm(Ref grads, int64_t count) {
  if (grads.dtype == comm::DType::kFloat32) return optim::localSquaredNorm(grads.f32(), count);
  std::vector<float> wide(static_cast<size_t>(count));
  const uint16_t* bits = static_cast<const uint16_t*>(grads.data);
  for (int64_t i = 0; i < count; ++i) wide[i] = comm::bfloat16ToFloat(bits[i]);
  return optim::localSquaredNorm(wide.data(), count);
}

// A copy to the host lands in a new host buffer (the start's result, which
// run() allocates in the host arena); a copy into the device overwrites its
// destination, the result, converting an f32 source to a bf16 one on the
// host first.
absl::Status Executor::bindCopy(Site& site) {
  const plan::Instruction& in = site.in;
  const bool toHost = !in.info->in_place;
  const int64_t src = in.operands[0];
  const int64_t dst = in.results[0];
  const plan::Buffer& from = plan_.buffers[src];
  const plan::Buffer& to = plan_.buffers[dst];
  if (from.numel() != to.numel()) {
    return site.fail(absl::StrCat("copies ", from.numel(), " elements (", from.name, ") into ",
                                  to.numel(), " (", to.name, ")"));
  }
  const bool convert = from.dtype != to.dtype;
  if (convert &&
      (toHost || from.dtype != comm::DType::kFloat32 || to.dtype != comm::DType::kBFloat16)) {
    return site.fail(absl::StrCat("copies ", std::string(comm::dtypeName(from.dtype)), " into ",
                                  std::string(comm::dtypeName(to.dtype)),
                                  "; a copy keeps its type, or rounds an f32 master copy into "
                                  "a bf16 parameter"));
  }
  const std::string handle = in.attrs.async_handle;
  copy_handles_.insert(handle);
  const size_t bytes = static_cast<size_t>(to.bytes);
  const int64_t count = to.numel();
  site.bound.body = [=, this](int64_t step) -> absl::Status {
    auto pending = std::make_shared<Pending>();
    pending->issued_us = TraceRecorder::nowUs();
    pending->collective = toHost ? "copy to host" : "copy to device";
    pending->index = in.index;
    pending->started = in.where();
    const void* source = bufferData(src);
    if (convert) {
      void* staging = host_allocator_->allocate(bytes);
      if (staging == nullptr) return outOfMemory(bytes, absl::StrCat(to.name, "'s staging"), true);
      pending->host_staging.push_back(staging);
      host_adamw_->toBfloat16(static_cast<const float*>(source), static_cast<uint16_t*>(staging),
                              count);
      source = staging;
    }
    absl::StatusOr<CopyFence> fence = kernels_->copyAsync(
        bufferData(dst), source, bytes, toHost ? CopyDirection::kToHost : CopyDirection::kToDevice);
    if (!fence.ok()) {
      for (void* block : pending->host_staging) host_allocator_->release(block);
      return absl::Status(fence.status().code(), absl::StrCat("step ", step, ", ", in.where(),
                                                              ": ", fence.status().message()));
    }
    pending->copy = *fence;
    copy_bytes_ += static_cast<int64_t>(bytes);
    traceSpan(in, step, in.op, "copy", in.index, pending->issued_us, static_cast<int64_t>(bytes));
    pending_[handle] = std::move(pending);
    return absl::OkStatus();
  };
  return absl::OkStatus();
}

// The wait of a copy: the host until it is done (the host step reads what
// came to the host, and the staging may be reused), then its result is the
// copy's destination: the host buffer, or the device buffer written in place.
absl::Status Executor::bindCopyWait(Site& site) {
  const plan::Instruction& in = site.in;
  const int64_t waited = in.operands[0];
  const int64_t result = in.results[0];
  const std::string handle = in.attrs.async_handle;
  site.bound.allocates_results = false;
  site.bound.body = [=, this](int64_t step) -> absl::Status {
    auto it = pending_.find(handle);
    if (it == pending_.end() || !it->second->copy) {
      return absl::InternalError(absl::StrCat(in.where(), ": copy '", handle, "' was not started"));
    }
    std::shared_ptr<Pending> p = std::move(it->second);
    pending_.erase(it);
    const double t0 = TraceRecorder::nowUs();
    absl::Status s = kernels_->finishCopy(*p->copy);
    copy_wait_us_ += TraceRecorder::nowUs() - t0;
    for (void* block : p->host_staging) host_allocator_->release(block);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("step ", step, ", ", in.where(), " (", handle,
                                                 ", started at ", p->started, "): ", s.message()));
    }
    traceSpan(in, step, absl::StrCat("wait ", p->collective), "compute", p->index, t0);
    if (result != waited) alias(result, waited);
    return absl::OkStatus();
  };
  return absl::OkStatus();
}

// AdamW where the offloaded states live, on the host's threads: the same
// arithmetic as the device's step (HostAdamW is adamwStep by chunks), the
// gradient scaled by the clip coefficient as the kernels would. With a
// master copy the bf16 parameter becomes the master rounded.
absl::Status Executor::bindHostOptimizerStep(Site& site, const optim::AdamWConfig& config) {
  const std::vector<int64_t>& o = site.in.operands;
  const comm::DType grad = plan_.buffers[o[1]].dtype;
  if (grad != comm::DType::kFloat32 && grad != comm::DType::kBFloat16) {
    return site.fail(absl::StrCat("the host step reads f32 or bf16 gradients; ",
                                  plan_.buffers[o[1]].name, " is ",
                                  std::string(comm::dtypeName(grad))));
  }
  const bool master = o.size() == 5;
  const int64_t n = numel(o[0]);
  site.bound.allocates_results = false;
  site.bound.body = [=, this](int64_t step) -> absl::Status {
    optim::AdamWConfig scheduled = config;
    scheduled.lr = config.lr * lr_factor_;
    float* weights = f32(master ? o[4] : o[0]);
    host_adamw_->step(scheduled, step, weights,
                      {bufferData(o[1]), grad == comm::DType::kBFloat16}, f32(o[2]), f32(o[3]), n,
                      host_clip_);
    if (master) host_adamw_->toBfloat16(weights, static_cast<uint16_t*>(bufferData(o[0])), n);
    return absl::OkStatus();
  };
  return absl::OkStatus();
}

absl::Status Executor::fetchHostClip() {
  host_clip_ = 1.0f;
  if (host_adamw_ == nullptr || clip_coefficient_ == nullptr) return absl::OkStatus();
  return kernels_->download(&host_clip_, clip_coefficient_, sizeof(float));
}

}  // namespace loom::runtime
