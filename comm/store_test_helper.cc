// A helper process for the multi-process store tests: serves a TCPStore,
// works on a shared store like one rank of a job, or joins a rendezvous, and
// reports on stdout so that the test can follow it.
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
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/file_store.h"
#include "comm/rendezvous.h"
#include "comm/store.h"
#include "comm/tcp_store.h"

ABSL_FLAG(std::string, mode, "",
          "server: serve a TCPStore until stdin closes; worker: add to a "
          "shared counter and meet the other workers; rendezvous: join --url");
ABSL_FLAG(std::string, store, "tcp", "worker: tcp or file");
ABSL_FLAG(int, port, 0, "server: port to serve (0: any); worker: its port");
ABSL_FLAG(std::string, path, "", "worker with --store=file: the store file");
ABSL_FLAG(std::string, token, "", "the TCPStore token");
ABSL_FLAG(int, rank, 0, "worker: this worker's index");
ABSL_FLAG(int, workers, 1, "worker: how many workers meet");
ABSL_FLAG(int, adds, 10, "worker: how many times to add 1 to the counter");
ABSL_FLAG(std::string, url, "", "rendezvous: the init method");
ABSL_FLAG(int, timeout_ms, 30000, "timeout of every store call");

namespace loom::comm {
namespace {

// Every report is one flushed line, so the test never waits on a buffer.
void report(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int fail(const absl::Status& status) {
  report(absl::StrCat("error ", errorKindName(errorKind(status)), " ", status.message()));
  return 2;
}

absl::Duration timeout() { return absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms)); }

// Lives until the test closes our stdin (or dies), bounded by the timeout.
void waitForStdinToClose() {
  pollfd entry{STDIN_FILENO, POLLIN, 0};
  while (::poll(&entry, 1, absl::GetFlag(FLAGS_timeout_ms)) > 0) {
    char byte;
    if (::read(STDIN_FILENO, &byte, 1) <= 0) return;
  }
}

int serve() {
  TCPStoreOptions options;
  options.is_server = true;
  options.port = static_cast<uint16_t>(absl::GetFlag(FLAGS_port));
  options.token = absl::GetFlag(FLAGS_token);
  options.timeout = timeout();
  absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create(options);
  if (!store.ok()) return fail(store.status());
  report(absl::StrCat("port ", (*store)->port()));
  waitForStdinToClose();
  return 0;
}

int work() {
  std::unique_ptr<Store> store;
  if (absl::GetFlag(FLAGS_store) == "file") {
    absl::StatusOr<std::unique_ptr<FileStore>> opened =
        FileStore::open(absl::GetFlag(FLAGS_path), timeout());
    if (!opened.ok()) return fail(opened.status());
    store = std::move(*opened);
  } else {
    TCPStoreOptions options;
    options.port = static_cast<uint16_t>(absl::GetFlag(FLAGS_port));
    options.token = absl::GetFlag(FLAGS_token);
    options.timeout = timeout();
    absl::StatusOr<std::unique_ptr<TCPStore>> opened = TCPStore::create(options);
    if (!opened.ok()) return fail(opened.status());
    store = std::move(*opened);
  }
  const int rank = absl::GetFlag(FLAGS_rank);
  for (int i = 0; i < absl::GetFlag(FLAGS_adds); ++i) {
    if (absl::StatusOr<int64_t> sum = store->add("counter", 1); !sum.ok()) {
      return fail(sum.status());
    }
  }
  if (absl::Status status = store->setString(absl::StrCat("worker/", rank), "here"); !status.ok()) {
    return fail(status);
  }
  std::vector<std::string> everyone;
  for (int i = 0; i < absl::GetFlag(FLAGS_workers); ++i) {
    everyone.push_back(absl::StrCat("worker/", i));
  }
  if (absl::Status status = store->wait(everyone); !status.ok()) {
    return fail(status);
  }
  report("done");
  return 0;
}

int joinRendezvous() {
  RendezvousOptions options;
  options.timeout = timeout();
  absl::StatusOr<RendezvousResult> result = rendezvous(absl::GetFlag(FLAGS_url), options);
  if (!result.ok()) return fail(result.status());
  report(absl::StrCat("rank ", result->rank, " world_size ", result->world_size, " local_rank ",
                      result->local_rank.value_or(-1)));
  // Everyone meets once more over the store, which exercises it.
  Store& store = *result->store;
  std::vector<std::string> everyone;
  for (int i = 0; i < result->world_size; ++i) {
    everyone.push_back(absl::StrCat("done/", i));
  }
  if (absl::Status status = store.setString(absl::StrCat("done/", result->rank), "1");
      !status.ok()) {
    return fail(status);
  }
  if (absl::Status status = store.wait(everyone); !status.ok()) {
    return fail(status);
  }
  // Rank 0 serves the store, so it leaves last: the others each say they
  // are leaving as their final call, and the server answers that call in
  // the same step in which it releases rank 0.
  if (result->rank != 0) {
    absl::Status status = store.setString(absl::StrCat("left/", result->rank), "1");
    return status.ok() ? 0 : fail(status);
  }
  std::vector<std::string> others;
  for (int i = 1; i < result->world_size; ++i) {
    others.push_back(absl::StrCat("left/", i));
  }
  absl::Status status = store.wait(others);
  return status.ok() ? 0 : fail(status);
}

}  // namespace
}  // namespace loom::comm

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "server") return loom::comm::serve();
  if (mode == "worker") return loom::comm::work();
  if (mode == "rendezvous") return loom::comm::joinRendezvous();
  std::fprintf(stderr, "unknown --mode '%s'; use server, worker or rendezvous\n", mode.c_str());
  return 64;
}
