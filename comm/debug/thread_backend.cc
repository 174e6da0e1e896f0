// The cross-thread exchange and the worker thread of ThreadBackend.
#include "comm/debug/thread_backend.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/errors.h"
#include "comm/work.h"

namespace loom::comm::debug {

absl::StatusOr<std::vector<Bytes>> ThreadGroup::exchange(uint64_t round_number, int rank,
                                                         Bytes part, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  Round& round = rounds_[round_number];
  if (round.parts.empty()) round.parts.resize(size_);
  round.parts[rank] = std::move(part);
  ++round.arrived;
  auto ready = [&round, this] { return round.arrived == size_ || round.abandoned; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  // Checked first: a rank that comes after another gave up must fail too,
  // even though it completes the count.
  if (round.abandoned || round.arrived != size_) {
    round.abandoned = true;
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!round.parts[r]) missing.push_back(r);
    }
    return timeoutError(absl::StrCat("thread exchange ", round_number, " abandoned: ranks [",
                                     absl::StrJoin(missing, ","), "] had not arrived within ",
                                     absl::FormatDuration(timeout)));
  }
  std::vector<Bytes> parts;
  for (const std::optional<Bytes>& p : round.parts) parts.push_back(*p);
  if (++round.left == size_) rounds_.erase(round_number);
  return parts;
}

ThreadBackend::ThreadBackend(std::shared_ptr<ThreadGroup> group, int rank, std::string group_name,
                             absl::Duration timeout)
    : Backend(BackendContext{nullptr, rank, group->size(), std::move(group_name), {}, timeout}),
      group_(std::move(group)),
      timeout_(timeout),
      worker_([this] { run(); }) {}

ThreadBackend::~ThreadBackend() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  worker_.join();
}

void ThreadBackend::run() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadBackend* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->tasks_.empty();
          },
          this));
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

Backend::WorkOr ThreadBackend::enqueue(Tensor input, const AllGatherOptions& options,
                                       const CollectiveInfo& info,
                                       std::function<void(const std::vector<Bytes>&)> deliver) {
  const absl::Duration timeout = options.timeout.value_or(timeout_);
  auto work = std::make_shared<Work>(info, timeout);
  const auto* data = static_cast<const uint8_t*>(input.data());
  Bytes part(data, data + input.nbytes());
  absl::MutexLock lock(&mu_);
  const uint64_t round = next_round_++;
  tasks_.push_back(
      [this, work, round, timeout, part = std::move(part), deliver = std::move(deliver)]() mutable {
        absl::StatusOr<std::vector<Bytes>> parts =
            group_->exchange(round, rank(), std::move(part), timeout);
        if (parts.ok()) deliver(*parts);
        work->complete(parts.status());
      });
  return work;
}

Backend::WorkOr ThreadBackend::allGatherIntoTensor(Tensor output, Tensor input,
                                                   const AllGatherOptions& options,
                                                   const CollectiveInfo& info) {
  if (output.nbytes() != input.nbytes() * static_cast<size_t>(size())) {
    return invalidArgumentError(absl::StrCat(info.describe(), ": output of ", output.nbytes(),
                                             " bytes for ", size(), " inputs of ", input.nbytes()));
  }
  return enqueue(input, options, info, [output, chunk = input.nbytes()](const auto& parts) {
    auto* out = static_cast<uint8_t*>(output.data());
    for (const Bytes& part : parts) {
      std::memcpy(out, part.data(), chunk);
      out += chunk;
    }
  });
}

Backend::WorkOr ThreadBackend::allGather(std::vector<Tensor> outputs, Tensor input,
                                         const AllGatherOptions& options,
                                         const CollectiveInfo& info) {
  if (outputs.size() != static_cast<size_t>(size())) {
    return invalidArgumentError(
        absl::StrCat(info.describe(), ": ", outputs.size(), " outputs for ", size(), " ranks"));
  }
  for (const Tensor& output : outputs) {
    if (output.nbytes() != input.nbytes()) {
      return invalidArgumentError(absl::StrCat(info.describe(), ": output of ", output.nbytes(),
                                               " bytes for an input of ", input.nbytes()));
    }
  }
  return enqueue(input, options, info, [outputs = std::move(outputs)](const auto& parts) {
    for (size_t r = 0; r < parts.size(); ++r) {
      std::memcpy(outputs[r].data(), parts[r].data(), parts[r].size());
    }
  });
}

std::vector<std::unique_ptr<Backend>> makeThreadBackends(int size, std::string group_name,
                                                         absl::Duration timeout) {
  auto group = std::make_shared<ThreadGroup>(size);
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < size; ++r) {
    backends.push_back(std::make_unique<ThreadBackend>(group, r, group_name, timeout));
  }
  return backends;
}

}  // namespace loom::comm::debug
