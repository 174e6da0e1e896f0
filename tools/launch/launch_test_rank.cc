// A rank program for the launcher's tests: reports the environment it was
// started with, then succeeds, fails, kills itself, sleeps or ignores
// SIGTERM as its arguments tell its rank to.
//
//   launch_test_rank [--sync_dir=DIR] WHO:WHAT...
//
// WHO is a rank or '*' (a rank's own entry wins over '*'); WHAT is one of
//   exit=N             exit with status N
//   signal=N           send itself signal N
//   signal_parent=N    send signal N to the launcher, then sleep
//   term_parent_twice  ignore SIGTERM, send the launcher two SIGTERMs 0.3 s
//                      apart, then sleep
//   sleep              sleep (60 s at most)
//   ignore_term        ignore SIGTERM, then sleep
//   lines=N            print N lines, each in several writes, and exit 0
//   partial            print a line without its newline and exit 0
//   orphan             start a child that ignores SIGTERM, print its pid,
//                      exit 0
// A rank with no entry exits 0. With --sync_dir every rank marks itself
// ready there once set up, and the actions that end or signal the job wait
// until all ranks are ready, so that no rank ends the job before the others
// have installed what the test is about.
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/launch/rank_env.h"

namespace {

// Unbuffered, so nothing is lost when the process dies by a signal.
void say(int fd, const std::string& text) {
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n <= 0) return;
    data += n;
    left -= n;
  }
}

std::string envOrUnset(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "<unset>";
}

// Bounded so that a launcher that fails to stop its ranks leaves nothing
// running for long; 99 tells a test the rank was never stopped.
[[noreturn]] void sleepThenExit() {
  for (int i = 0; i < 60; ++i) ::sleep(1);
  std::exit(99);
}

std::string readyFile(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/ready.", rank);
}

void markReady(const std::string& dir, int rank) {
  if (dir.empty()) return;
  std::ofstream(readyFile(dir, rank)) << "ready\n";
}

void waitForAll(const std::string& dir, int world_size) {
  if (dir.empty()) return;
  for (int tries = 0; tries < 2000; ++tries) {
    int ready = 0;
    for (int rank = 0; rank < world_size; ++rank) {
      struct stat info;
      if (::stat(readyFile(dir, rank).c_str(), &info) == 0) ++ready;
    }
    if (ready == world_size) return;
    ::usleep(10'000);
  }
  say(STDOUT_FILENO, "barrier timed out\n");
  std::exit(98);
}

int numberAfter(const std::string& what, absl::string_view name) {
  int value = 0;
  if (!absl::SimpleAtoi(absl::string_view(what).substr(name.size()), &value)) {
    say(STDERR_FILENO, absl::StrCat("bad action '", what, "'\n"));
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  std::string sync_dir;
  std::optional<std::string> own_action;
  std::optional<std::string> any_action;
  absl::StatusOr<loom::launch::RankEnv> env = loom::launch::detectRankEnv();
  if (!env.ok()) {
    say(STDOUT_FILENO, absl::StrCat("rank_env error: ", env.status().message(), "\n"));
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--sync_dir=")) {
      sync_dir = arg.substr(std::strlen("--sync_dir="));
      continue;
    }
    const std::pair<std::string, std::string> who_what =
        absl::StrSplit(arg, absl::MaxSplits(':', 1));
    if (who_what.first == "*") {
      any_action = who_what.second;
    } else if (who_what.first == std::to_string(env->rank)) {
      own_action = who_what.second;
    }
  }
  const std::string action = own_action.value_or(any_action.value_or("exit=0"));
  const int rank = env->rank;

  std::string report = "env";
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                           "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOOM_STORE_TOKEN"}) {
    absl::StrAppend(&report, " ", name, "=", envOrUnset(name));
  }
  absl::StrAppend(&report, " pid=", ::getpid(), "\n");
  say(STDOUT_FILENO, report);
  say(STDOUT_FILENO,
      absl::StrCat("rank_env source=", loom::launch::rankEnvSourceName(env->source), " rank=", rank,
                   " world_size=", env->world_size, " local_rank=", env->local_rank,
                   " master=", env->master_addr, ":", env->master_port, "\n"));
  say(STDERR_FILENO, absl::StrCat("stderr of rank ", rank, "\n"));

  if (action == "ignore_term" || action == "term_parent_twice") {
    ::signal(SIGTERM, SIG_IGN);
  }
  markReady(sync_dir, rank);

  if (action == "sleep" || action == "ignore_term") sleepThenExit();
  if (absl::StartsWith(action, "exit=")) {
    const int code = numberAfter(action, "exit=");
    waitForAll(sync_dir, env->world_size);
    return code;
  }
  if (absl::StartsWith(action, "signal=")) {
    const int signal = numberAfter(action, "signal=");
    waitForAll(sync_dir, env->world_size);
    ::kill(::getpid(), signal);
    return 97;
  }
  if (absl::StartsWith(action, "signal_parent=")) {
    const int signal = numberAfter(action, "signal_parent=");
    waitForAll(sync_dir, env->world_size);
    ::kill(::getppid(), signal);
    sleepThenExit();
  }
  if (action == "term_parent_twice") {
    waitForAll(sync_dir, env->world_size);
    ::kill(::getppid(), SIGTERM);
    ::usleep(300'000);
    ::kill(::getppid(), SIGTERM);
    sleepThenExit();
  }
  if (absl::StartsWith(action, "lines=")) {
    const int count = numberAfter(action, "lines=");
    const std::string body(100, 'x');
    // Three writes per line, with yields between, give the scheduler every
    // chance to interleave ranks mid-line if the launcher did not buffer.
    for (int line = 1; line <= count; ++line) {
      say(STDOUT_FILENO, absl::StrCat("line ", line, "/", count, " from rank ", rank, " "));
      ::sched_yield();
      say(STDOUT_FILENO, body);
      ::sched_yield();
      say(STDOUT_FILENO, " end\n");
    }
    return 0;
  }
  if (action == "partial") {
    say(STDOUT_FILENO, absl::StrCat("partial line of rank ", rank));
    return 0;
  }
  if (action == "orphan") {
    const pid_t child = ::fork();
    if (child == 0) {
      ::signal(SIGTERM, SIG_IGN);
      for (int i = 0; i < 60; ++i) ::sleep(1);
      ::_exit(0);
    }
    say(STDOUT_FILENO, absl::StrCat("grandchild pid=", child, "\n"));
    return 0;
  }
  say(STDERR_FILENO, absl::StrCat("unknown action '", action, "'\n"));
  return 2;
}
