// One rank of a multi-process ProcessGroup test: joins a group through the
// test's TCPStore, runs a scenario and reports on stdout, one flushed line
// per event, so that the test can follow (and kill) it.
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/all_backends.h"
#include "comm/errors.h"
#include "comm/process_group.h"
#include "comm/tcp_store.h"
#include "comm/testing/process_group_testing.h"

ABSL_FLAG(int, port, 0, "the test's TCPStore port on 127.0.0.1");
ABSL_FLAG(int, rank, 0, "this rank");
ABSL_FLAG(int, size, 2, "the world size");
ABSL_FLAG(std::string, scenario, "collectives",
          "collectives: check one call of each kind; loop: all_reduce until one fails; "
          "skip_rank1: rank 1 skips an all_reduce the others make");
ABSL_FLAG(int, timeout_ms, 30000, "the group's timeout");
ABSL_FLAG(bool, checks, true, "cross-rank checks (cheap) on, or off");

namespace loom::comm {
namespace {

using testing::Buffer;
using testing::testValue;

void report(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int fail(const absl::Status& status) {
  report(absl::StrCat("error ", errorKindName(errorKind(status)), " ", status.message()));
  return 2;
}

// Blocks until the test closes our stdin (or kills us).
void waitForStdinToClose() {
  pollfd entry{STDIN_FILENO, POLLIN, 0};
  while (::poll(&entry, 1, -1) > 0) {
    char byte;
    if (::read(STDIN_FILENO, &byte, 1) <= 0) return;
  }
}

absl::Status waitFor(const absl::StatusOr<std::shared_ptr<Work>>& work) {
  if (!work.ok()) return work.status();
  return (*work)->wait();
}

absl::Status expectValues(const std::string& what, const Buffer& got,
                          const std::vector<double>& want) {
  if (got.values() == want) return absl::OkStatus();
  return backendError(absl::StrCat(what, ": got [", absl::StrJoin(got.values(), ", "), "], want [",
                                   absl::StrJoin(want, ", "), "]"));
}

// One call of each kind, checked against values computed here.
absl::Status collectives(ProcessGroup& group) {
  const int n = group.size();
  const int me = group.rank();
  Buffer sum = Buffer::of(DType::kFloat32, {1.0 * me, 2.0 * me, 3.0});
  if (absl::Status s = waitFor(group.allReduce(sum.tensor())); !s.ok()) return s;
  const double ranks = n * (n - 1) / 2.0;
  if (absl::Status s = expectValues("all_reduce", sum, {ranks, 2 * ranks, 3.0 * n}); !s.ok()) {
    return s;
  }

  Buffer mine = Buffer::of(DType::kInt64, {10.0 * me, 10.0 * me + 1});
  Buffer gathered(DType::kInt64, {2 * n});
  if (absl::Status s = waitFor(group.allGatherIntoTensor(gathered.tensor(), mine.tensor()));
      !s.ok()) {
    return s;
  }
  std::vector<double> want;
  for (int r = 0; r < n; ++r) want.insert(want.end(), {10.0 * r, 10.0 * r + 1});
  if (absl::Status s = expectValues("all_gather", gathered, want); !s.ok()) return s;

  Buffer input(DType::kInt32, {n});
  for (int r = 0; r < n; ++r) input.set(r, 100 * me + r);
  Buffer chunk(DType::kInt32, {1});
  if (absl::Status s = waitFor(group.reduceScatterTensor(chunk.tensor(), input.tensor()));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = expectValues("reduce_scatter", chunk, {100 * ranks + n * me}); !s.ok()) {
    return s;
  }

  Buffer root_value = Buffer::of(DType::kBFloat16, {me == n - 1 ? 1.5 : 0.0});
  if (absl::Status s = waitFor(group.broadcast(root_value.tensor(), {.root = n - 1})); !s.ok()) {
    return s;
  }
  if (absl::Status s = expectValues("broadcast", root_value, {1.5}); !s.ok()) return s;

  Buffer out = Buffer::of(DType::kUInt8, {static_cast<double>(me)});
  Buffer in(DType::kUInt8, {1});
  const absl::StatusOr<std::shared_ptr<Work>> sent = group.send(out.tensor(), (me + 1) % n);
  if (absl::Status s = waitFor(group.recv(in.tensor(), (me + n - 1) % n)); !s.ok()) return s;
  if (absl::Status s = waitFor(sent); !s.ok()) return s;
  if (absl::Status s = expectValues("recv", in, {static_cast<double>((me + n - 1) % n)}); !s.ok()) {
    return s;
  }
  return waitFor(group.barrier());
}

// all_reduce of 4 MiB until a call fails (a peer is killed meanwhile).
int loop(ProcessGroup& group) {
  Buffer buffer(DType::kFloat32, {1 << 20});
  for (int i = 0;; ++i) {
    const absl::Time start = absl::Now();
    if (absl::Status s = waitFor(group.allReduce(buffer.tensor())); !s.ok()) {
      report(absl::StrCat("failed after ", absl::ToInt64Milliseconds(absl::Now() - start), " ms"));
      return fail(s);
    }
    if (i == 0) report("looping");
  }
}

int run() {
  registerAllBackends();
  TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(absl::GetFlag(FLAGS_port));
  store_options.timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create(store_options);
  if (!store.ok()) return fail(store.status());
  ProcessGroupOptions options;
  options.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  options.checks = absl::GetFlag(FLAGS_checks) ? CollectiveChecks::kCheap : CollectiveChecks::kOff;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
      ProcessGroup::create(std::shared_ptr<Store>(std::move(*store)), absl::GetFlag(FLAGS_rank),
                           absl::GetFlag(FLAGS_size), options);
  if (!group.ok()) return fail(group.status());
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  if (scenario == "collectives") {
    if (absl::Status s = collectives(**group); !s.ok()) return fail(s);
    report("ok");
    return 0;
  }
  if (scenario == "loop") return loop(**group);
  if (scenario == "skip_rank1") {
    if (absl::Status s = waitFor((*group)->barrier()); !s.ok()) return fail(s);
    if ((*group)->rank() == 1) {
      report("skipping");
      waitForStdinToClose();
      return 0;
    }
    Buffer buffer(DType::kFloat32, {8});
    if (absl::Status s = waitFor((*group)->allReduce(buffer.tensor())); !s.ok()) return fail(s);
    report("all_reduce finished without rank 1");
    return 1;
  }
  report(absl::StrCat("unknown scenario ", scenario));
  return 1;
}

}  // namespace
}  // namespace loom::comm

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return loom::comm::run();
}
