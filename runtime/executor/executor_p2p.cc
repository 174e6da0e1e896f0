// The binders of dist.send, dist.recv and their _start forms: one transfer
// to or from the rank whose coordinate along the pipeline axis is the
// instruction's peer (the axis group is numbered by that coordinate). A
// started send's handle buffer is the sent tensor itself, so its dist.wait
// yields it back and its memory lives until the transfer is done; a
// receive writes into its result.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/executor_internal.h"
#include "plan/op_table.h"

namespace loom::runtime {

absl::Status Executor::bindPointToPoint(Site& site) {
  const plan::Instruction& in = site.in;
  const bool send = in.info->p2p == plan::PointToPoint::kSend;
  const bool async = in.info->async_start;
  if (absl::Status st = site.need(send ? 1 : 0, send && !async ? 0 : 1); !st.ok()) return st;
  const auto& [o, r] = site.io();
  absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> group = groups_->groupFor(in.attrs.mesh_axes);
  if (!group.ok()) return site.fail(std::string(group.status().message()));
  const int peer = static_cast<int>(in.attrs.peer.value_or(-1));
  if (peer < 0 || peer >= (*group)->size() || peer == (*group)->rank()) {
    return site.fail(absl::StrCat("peer ", peer, " is not another rank of the ", (*group)->size(),
                                  "-rank group along ", in.attrs.mesh_axes.front()));
  }
  const int64_t buffer = send ? o[0] : r[0];
  const int64_t count = numel(buffer);
  const comm::P2POptions options{.tag = static_cast<int>(in.attrs.tag.value_or(0)),
                                 .timeout = options_.timeout};
  const std::string kind = send ? "send" : "recv";
  const std::string handle = async ? in.attrs.async_handle : "";
  const int64_t bytes = in.attrs.bytes.value_or(0);
  // A started send defines its handle buffer as the sent tensor.
  if (send && async) site.bound.allocates_results = false;
  site.bound.body = [=, this, pg = *group](int64_t step) -> absl::Status {
    if (stacks_[buffer].rows > 0) {
      return absl::UnimplementedError(
          absl::StrCat(in.where(), ": deterministic mode keeps per-row partial sums, which ",
                       "a pipeline stage does not ", kind, " (run without --deterministic)"));
    }
    const Ref data = ref(buffer);
    const comm::Tensor tensor(data.data, data.dtype, {count}, kernels_->device());
    absl::StatusOr<std::shared_ptr<comm::Work>> work =
        send ? pg->send(tensor, peer, options) : pg->recv(tensor, peer, options);
    if (!work.ok()) {
      return absl::Status(work.status().code(), absl::StrCat("step ", step, ", ", in.where(), ": ",
                                                             work.status().message()));
    }
    comm_bytes_ += bytes;
    step_works_.emplace_back(in.where(), *work);
    auto p = std::make_shared<Pending>();
    p->work = *work;
    p->collective = kind;
    p->axes = in.attrs.mesh_axes.front();
    p->index = in.index;
    p->started = in.where();
    p->issued_us = TraceRecorder::nowUs();
    p->peer = peer;
    if (options_.trace) traceTransfer(in, *p, step, absl::StrCat("comm:", pg->name()), bytes);
    if (!async) {
      const double t0 = TraceRecorder::nowUs();
      absl::Status s = kernels_->await(**work, options_.timeout);
      const double t1 = TraceRecorder::nowUs();
      if (!s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("step ", step, ", ", in.where(), ": ", s.message()));
      }
      wait_us_ += t1 - t0;
      traceTransferBubble(in, *p, step, t0, t1);
      return absl::OkStatus();
    }
    if (send) alias(r[0], o[0]);
    pending_[handle] = std::move(p);
    return absl::OkStatus();
  };
  return absl::OkStatus();
}

void Executor::traceTransferBubble(const plan::Instruction& in, const Pending& p, int64_t step,
                                   double t0_us, double t1_us) {
  const bool send = p.collective == "send";
  traceBubble(step,
              absl::StrCat("bubble ", in.block, " mb", micro_, " (", p.collective,
                           send ? " to" : " from", " stage ", p.peer, ")"),
              in.block, t0_us, t1_us);
}

}  // namespace loom::runtime
