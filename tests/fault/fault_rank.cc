// One rank of a fault-injection test (tests/fault/): joins a process group,
// runs collectives, and when it is the culprit injects one fault (exits,
// dies, skips a call, or calls a different op, shape or dtype). Every event
// is one flushed line on stdout, so that the test can follow, time and kill
// the ranks; `--scenario=serve` instead serves the job's TCPStore.
//
//   ready pid=P rank=R size=N      the group exists
//   looping                        the first call of --scenario=loop succeeded
//   dying mid-call / exiting with C / raising signal S   the culprit's fault
//   done                           --scenario=once completed on this rank
//   error kind=K after_ms=T MSG    a call failed after T ms (MSG: its message)
//   serving port=P pid=Q           --scenario=serve is up
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/all_backends.h"
#include "comm/errors.h"
#include "comm/file_store.h"
#include "comm/process_group.h"
#include "comm/rendezvous.h"
#include "comm/tcp_store.h"
#include "comm/tensor.h"
#include "tools/launch/rank_env.h"

ABSL_FLAG(std::string, store, "env",
          "how ranks meet: env (env:// rendezvous, as under //tools:launch), "
          "tcp:PORT (a TCPStore served on 127.0.0.1:PORT by the test or by "
          "--scenario=serve), file:PATH (a FileStore, for mpirun)");
ABSL_FLAG(int, rank, -1, "this rank; -1 reads it from the launcher's environment");
ABSL_FLAG(int, size, -1, "the world size; -1 reads it from the launcher's environment");
ABSL_FLAG(std::string, backend, "gloo", "the CPU backend: gloo or mpi");
ABSL_FLAG(std::string, checks, "cheap", "cross-rank checks: off, cheap or detail");
ABSL_FLAG(int, timeout_ms, 3000, "the group's timeout, which bounds every call");
ABSL_FLAG(std::string, scenario, "loop",
          "loop: --op until a call fails; once: one --op; store_loop: --op "
          "then a monitored barrier (which goes through the store) until one "
          "fails; serve: serve a TCPStore until stdin closes");
ABSL_FLAG(std::string, op, "all_reduce", "all_reduce, all_gather or reduce_scatter");
ABSL_FLAG(int, elements, 1024, "f32 elements each rank contributes");
ABSL_FLAG(int, culprit, -1, "the rank that injects --fault (-1: none)");
ABSL_FLAG(std::string, fault, "",
          "loop: exit:CODE, signal:SIG (raise it between calls), kill_inflight "
          "(issue the call, then SIGKILL itself while it runs); once: skip, "
          "wrong_op (reduce instead of all_reduce, broadcast otherwise), "
          "wrong_count (twice the elements), wrong_dtype (f64), reshape (the "
          "same elements in another shape, which only detail checks see)");
ABSL_FLAG(int, fault_after, 3, "loop: calls the culprit completes before its fault");
ABSL_FLAG(bool, hold, false,
          "after reporting, wait for stdin to close before exiting, so that "
          "no rank's exit disturbs the others while the test watches; a loop "
          "also stops when stdin closes");
ABSL_FLAG(int, linger_ms, 0,
          "after reporting, stay alive this long before exiting (under mpirun, "
          "where stdin cannot hold a rank)");
ABSL_FLAG(int, port, 0, "serve: the port (0: a free one)");
ABSL_FLAG(std::string, token, "", "the store token (serve and tcp:PORT)");
ABSL_FLAG(int, handshake_timeout_ms, 10000, "serve: the server's handshake deadline");

namespace loom::fault {
namespace {

using comm::DType;
using comm::ProcessGroup;
using comm::Tensor;

void report(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void waitForStdinToClose() {
  pollfd entry{STDIN_FILENO, POLLIN, 0};
  while (::poll(&entry, 1, -1) > 0) {
    char byte;
    if (::read(STDIN_FILENO, &byte, 1) <= 0) return;
  }
}

// Whether the test closed our stdin (non-blocking).
bool stdinClosed() {
  pollfd entry{STDIN_FILENO, POLLIN, 0};
  if (::poll(&entry, 1, 0) <= 0) return false;
  char byte;
  return ::read(STDIN_FILENO, &byte, 1) <= 0;
}

int finish(int code) {
  if (absl::GetFlag(FLAGS_hold)) waitForStdinToClose();
  absl::SleepFor(absl::Milliseconds(absl::GetFlag(FLAGS_linger_ms)));
  return code;
}

int fail(const absl::Status& status, absl::Duration after) {
  std::string message(status.message());
  // One line per event: multi-line messages (Gloo's) are joined.
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  report(absl::StrCat("error kind=", comm::errorKindName(comm::errorKind(status)),
                      " after_ms=", absl::ToInt64Milliseconds(after), " ", message));
  return finish(2);
}

absl::Status waitFor(const ProcessGroup::WorkOr& work) {
  if (!work.ok()) return work.status();
  return (*work)->wait();
}

// Buffers for one call of --op (or of the culprit's variant of it).
struct Call {
  std::vector<double> input;
  std::vector<double> output;
};

// Issues one call of `op` with `elements` f32 per rank; `fault` (once only)
// turns it into the culprit's mismatched call.
ProcessGroup::WorkOr issue(ProcessGroup& group, const std::string& op, int elements,
                           const std::string& fault, Call& call) {
  const int64_t n = group.size();
  const int64_t count = fault == "wrong_count" ? 2 * elements : elements;
  const DType dtype = fault == "wrong_dtype" ? DType::kFloat64 : DType::kFloat32;
  const int64_t in_count = op == "reduce_scatter" ? count * n : count;
  const int64_t out_count = op == "all_gather" ? count * n : count;
  // Doubles hold enough bytes for either dtype; the values do not matter.
  call.input.assign(static_cast<size_t>(in_count), 0.0);
  call.output.assign(static_cast<size_t>(out_count), 0.0);
  std::vector<int64_t> in_shape = {in_count};
  if (fault == "reshape" && in_count % 32 == 0) in_shape = {in_count / 32, 32};
  const Tensor input(call.input.data(), dtype, in_shape);
  const Tensor output(call.output.data(), dtype, {out_count});
  if (fault == "wrong_op") {
    if (op == "all_reduce") return group.reduce(input, {.root = 0});
    return group.broadcast(input, {.root = 0});
  }
  if (op == "all_reduce") return group.allReduce(input);
  if (op == "all_gather") return group.allGatherIntoTensor(output, input);
  if (op == "reduce_scatter") return group.reduceScatterTensor(output, input);
  return comm::invalidArgumentError(
      absl::StrCat("--op=", op, " is not one of all_reduce, all_gather, reduce_scatter"));
}

absl::StatusOr<int> parseFaultNumber(const std::string& fault) {
  int value = 0;
  const std::vector<std::string> parts = absl::StrSplit(fault, ':');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &value)) {
    return comm::invalidArgumentError(
        absl::StrCat("--fault=", fault, " needs a number, e.g. exit:3 or signal:9"));
  }
  return value;
}

// Runs --op until a call fails; the culprit injects its fault after
// --fault_after calls. With `barrier`, each call is followed by a monitored
// barrier, which talks to the store.
int loop(ProcessGroup& group, bool barrier) {
  const std::string op = absl::GetFlag(FLAGS_op);
  const std::string fault = absl::GetFlag(FLAGS_fault);
  const bool culprit = group.rank() == absl::GetFlag(FLAGS_culprit);
  Call call;
  for (int i = 0;; ++i) {
    if (culprit && i == absl::GetFlag(FLAGS_fault_after)) {
      if (fault == "kill_inflight") {
        ProcessGroup::WorkOr work = issue(group, op, absl::GetFlag(FLAGS_elements), "", call);
        report("dying mid-call");
        // Long enough for the peers' halves of the call to be under way.
        absl::SleepFor(absl::Milliseconds(20));
        std::raise(SIGKILL);
      }
      absl::StatusOr<int> number = parseFaultNumber(fault);
      if (!number.ok()) return fail(number.status(), absl::ZeroDuration());
      if (absl::StartsWith(fault, "exit:")) {
        report(absl::StrCat("exiting with ", *number));
        std::_Exit(*number);
      }
      report(absl::StrCat("raising signal ", *number));
      std::signal(*number, SIG_DFL);
      std::raise(*number);
    }
    const absl::Time start = absl::Now();
    absl::Status status = waitFor(issue(group, op, absl::GetFlag(FLAGS_elements), "", call));
    if (status.ok() && barrier) status = group.monitoredBarrier();
    if (!status.ok()) return fail(status, absl::Now() - start);
    if (i == 0) report("looping");
    if (absl::GetFlag(FLAGS_hold) && stdinClosed()) {
      report("stopped");
      return 0;
    }
  }
}

// One call of --op; the culprit skips it or makes a mismatched call.
int once(ProcessGroup& group) {
  const std::string fault =
      group.rank() == absl::GetFlag(FLAGS_culprit) ? absl::GetFlag(FLAGS_fault) : "";
  if (fault == "skip") {
    report("skipping");
    return finish(0);
  }
  Call call;
  const absl::Time start = absl::Now();
  const absl::Status status =
      waitFor(issue(group, absl::GetFlag(FLAGS_op), absl::GetFlag(FLAGS_elements), fault, call));
  if (!status.ok()) return fail(status, absl::Now() - start);
  report(absl::StrCat("done after_ms=", absl::ToInt64Milliseconds(absl::Now() - start)));
  return finish(0);
}

int serve() {
  comm::TCPStoreOptions options;
  options.is_server = true;
  options.port = static_cast<uint16_t>(absl::GetFlag(FLAGS_port));
  options.token = absl::GetFlag(FLAGS_token);
  options.handshake_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_handshake_timeout_ms));
  options.timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<comm::TCPStore>> server = comm::TCPStore::create(options);
  if (!server.ok()) return fail(server.status(), absl::ZeroDuration());
  report(absl::StrCat("serving port=", (*server)->port(), " pid=", ::getpid()));
  waitForStdinToClose();
  return 0;
}

struct Membership {
  std::shared_ptr<comm::Store> store;
  int rank = 0;
  int size = 0;
};

absl::StatusOr<Membership> join() {
  const std::string store = absl::GetFlag(FLAGS_store);
  const absl::Duration timeout = absl::Seconds(60);
  Membership membership;
  membership.rank = absl::GetFlag(FLAGS_rank);
  membership.size = absl::GetFlag(FLAGS_size);
  if (store == "env") {
    comm::RendezvousOptions options;
    options.timeout = timeout;
    absl::StatusOr<comm::RendezvousResult> result = comm::rendezvous("env://", options);
    if (!result.ok()) return result.status();
    return Membership{result->store, result->rank, result->world_size};
  }
  if (membership.rank < 0 || membership.size < 0) {
    absl::StatusOr<launch::RankEnv> env = launch::detectRankEnv();
    if (!env.ok()) return env.status();
    membership.rank = env->rank;
    membership.size = env->world_size;
  }
  if (absl::StartsWith(store, "tcp:")) {
    int port = 0;
    if (!absl::SimpleAtoi(store.substr(4), &port)) {
      return comm::invalidArgumentError(absl::StrCat("--store=", store, ": not tcp:PORT"));
    }
    comm::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.timeout = timeout;
    options.token = absl::GetFlag(FLAGS_token);
    absl::StatusOr<std::unique_ptr<comm::TCPStore>> client = comm::TCPStore::create(options);
    if (!client.ok()) return client.status();
    membership.store = std::move(*client);
    return membership;
  }
  if (absl::StartsWith(store, "file:")) {
    absl::StatusOr<std::unique_ptr<comm::FileStore>> file =
        comm::FileStore::open(store.substr(5), timeout);
    if (!file.ok()) return file.status();
    membership.store = std::move(*file);
    return membership;
  }
  return comm::invalidArgumentError(
      absl::StrCat("--store=", store, " is not env, tcp:PORT or file:PATH"));
}

int run() {
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  if (scenario == "serve") return serve();
  comm::registerAllBackends();
  absl::StatusOr<Membership> membership = join();
  if (!membership.ok()) return fail(membership.status(), absl::ZeroDuration());
  comm::ProcessGroupOptions options;
  options.cpu_backend = absl::GetFlag(FLAGS_backend);
  options.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  const std::string checks = absl::GetFlag(FLAGS_checks);
  options.checks = checks == "off"      ? comm::CollectiveChecks::kOff
                   : checks == "detail" ? comm::CollectiveChecks::kDetail
                                        : comm::CollectiveChecks::kCheap;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
      ProcessGroup::create(membership->store, membership->rank, membership->size, options);
  if (!group.ok()) return fail(group.status(), absl::ZeroDuration());
  report(absl::StrCat("ready pid=", ::getpid(), " rank=", membership->rank,
                      " size=", membership->size));
  if (scenario == "loop") return loop(**group, /*barrier=*/false);
  if (scenario == "store_loop") return loop(**group, /*barrier=*/true);
  if (scenario == "once") return once(**group);
  return fail(comm::invalidArgumentError(absl::StrCat("unknown --scenario=", scenario)),
              absl::ZeroDuration());
}

}  // namespace
}  // namespace loom::fault

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return loom::fault::run();
}
