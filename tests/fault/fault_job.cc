// Implements FaultJob: the store, the ranks, and parsing their reports.
#include "tests/fault/fault_job.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace loom::fault {

absl::StatusOr<RankError> parseRankError(const std::string& line) {
  // error kind=K after_ms=T MESSAGE
  const size_t kind_at = line.find("kind=");
  const size_t after_at = line.find(" after_ms=");
  if (!absl::StartsWith(line, "error ") || kind_at == std::string::npos ||
      after_at == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("not an error report: ", line));
  }
  RankError error;
  error.kind = line.substr(kind_at + 5, after_at - kind_at - 5);
  const size_t message_at = line.find(' ', after_at + 1);
  int64_t ms = 0;
  if (!absl::SimpleAtoi(line.substr(after_at + 10, message_at - after_at - 10), &ms)) {
    return absl::InvalidArgumentError(absl::StrCat("bad after_ms in: ", line));
  }
  error.after = absl::Milliseconds(ms);
  error.message = message_at == std::string::npos ? "" : line.substr(message_at + 1);
  error.seen = absl::Now();
  return error;
}

FaultJob::FaultJob(StoreHost host, const std::string& token,
                   const std::vector<std::string>& store_flags) {
  if (host == StoreHost::kTest) {
    comm::TCPStoreOptions options;
    options.is_server = true;
    options.token = token;
    options.timeout = absl::Seconds(60);
    absl::StatusOr<std::unique_ptr<comm::TCPStore>> server = comm::TCPStore::create(options);
    if (!server.ok()) return;
    server_ = std::move(*server);
    port_ = server_->port();
    return;
  }
  std::vector<std::string> argv = {runfilePath("tests/fault/fault_rank"), "--scenario=serve",
                                   absl::StrCat("--token=", token)};
  argv.insert(argv.end(), store_flags.begin(), store_flags.end());
  absl::StatusOr<FaultProcess> process = FaultProcess::start(argv);
  if (!process.ok()) return;
  store_process_.emplace(std::move(*process));
  absl::StatusOr<std::string> line =
      store_process_->awaitPrefix("serving port=", absl::Now() + absl::Seconds(30));
  int port = 0;
  if (!line.ok()) return;
  const size_t space = line->find(' ', 13);
  if (absl::SimpleAtoi(line->substr(13, space - 13), &port)) port_ = static_cast<uint16_t>(port);
}

absl::Status FaultJob::start(int size, const std::vector<std::string>& flags,
                             const std::vector<std::string>& env) {
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> argv = {runfilePath("tests/fault/fault_rank"),
                                     absl::StrCat("--store=tcp:", port_),
                                     absl::StrCat("--rank=", r), absl::StrCat("--size=", size)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<FaultProcess> process = FaultProcess::start(argv, env);
    if (!process.ok()) return process.status();
    ranks_.push_back(std::move(*process));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int r = 0; r < size; ++r) {
    absl::StatusOr<std::string> ready =
        ranks_[static_cast<size_t>(r)].awaitPrefix("ready", deadline);
    if (!ready.ok()) {
      return absl::Status(ready.status().code(),
                          absl::StrCat("rank ", r, " never got ready: ", ready.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RankError> FaultJob::awaitError(int r, absl::Time deadline) {
  absl::StatusOr<std::string> line = rank(r).awaitLine(
      [](const std::string& l) {
        return absl::StartsWith(l, "error ") || absl::StartsWith(l, "done");
      },
      deadline);
  if (!line.ok()) {
    return absl::Status(line.status().code(),
                        absl::StrCat("rank ", r, ": ", line.status().message()));
  }
  if (absl::StartsWith(*line, "done")) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", r, " completed the call instead of failing: ", *line));
  }
  return parseRankError(*line);
}

std::vector<int> FaultJob::finish(absl::Time deadline) {
  std::vector<int> codes;
  for (FaultProcess& process : ranks_) process.closeStdin();
  for (FaultProcess& process : ranks_) {
    absl::StatusOr<int> code = process.wait(deadline);
    codes.push_back(code.ok() ? *code : -1);
  }
  if (store_process_.has_value()) {
    store_process_->closeStdin();
    // A store killed by the test was reaped there already.
    store_process_->wait(deadline).status().IgnoreError();
  }
  return codes;
}

bool FaultJob::nothingLeft() const {
  for (const FaultProcess& process : ranks_) {
    if (!process.groupGone()) return false;
  }
  return !store_process_.has_value() || store_process_->groupGone();
}

}  // namespace loom::fault
