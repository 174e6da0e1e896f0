// Benchmarks loom's TCPStore against PyTorch's torch.distributed.TCPStore on
// the same machine in one run: rendezvous time for N client processes and
// set/get/add throughput for C concurrent client processes, as one table.
// The PyTorch half is store_bench_torch.py, which runs the same workloads on
// request; docs/store_bench.md explains them and records a run.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "comm/rendezvous.h"
#include "comm/socket.h"
#include "comm/tcp_store.h"

ABSL_FLAG(std::string, rendezvous_sizes, "8,32,128",
          "client process counts for the rendezvous rows");
ABSL_FLAG(std::string, client_counts, "1,32",
          "concurrent client processes for the throughput rows");
ABSL_FLAG(int, ops, 2000, "calls per client per throughput run");
ABSL_FLAG(int, repeats, 3, "runs per row; the median is shown");
ABSL_FLAG(bool, torch, true, "also measure PyTorch's TCPStore");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "an interpreter with torch (Debian's python3-torch)");
ABSL_FLAG(std::string, torch_script, "comm/store_bench_torch.py",
          "the PyTorch half of the benchmark (runfiles path under bazel run)");
ABSL_FLAG(int, timeout_s, 120, "bound on every store call and every run");

namespace loom::comm {
namespace {

using Clock = std::chrono::steady_clock;

const Bytes kValue(64, 'v');

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Duration timeout() { return absl::Seconds(absl::GetFlag(FLAGS_timeout_s)); }

bool readExactly(int fd, size_t count, Clock::time_point deadline, std::string* out = nullptr) {
  size_t got = 0;
  char buffer[256];
  while (got < count) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd entry{fd, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(fd, buffer, std::min(sizeof(buffer), count - got));
    if (n <= 0) return false;
    if (out != nullptr) out->append(buffer, static_cast<size_t>(n));
    got += static_cast<size_t>(n);
  }
  return true;
}

void writeByte(int fd, char byte) { [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1); }

[[noreturn]] void outOfDescriptors() {
  std::fprintf(stderr,
               "cannot create pipes for the client processes: %s; raise the "
               "open file limit (ulimit -n) or use fewer processes\n",
               std::strerror(errno));
  std::exit(1);
}

// A set of forked client processes. Each waits for the port on its start
// pipe, runs its body, and reports one byte on the shared done pipe. They are
// forked before the parent starts a server thread, so that they inherit no
// threads or locks.
class Clients {
 public:
  // body(index, port, ready, wait_start) returns whether it succeeded;
  // ready() reports "set up", wait_start() blocks for the start byte.
  using Body = std::function<bool(int, uint16_t, const std::function<void()>&,
                                  const std::function<bool()>&)>;

  Clients(int count, const Body& body) {
    int done[2];
    int ready[2];
    if (::pipe(done) != 0 || ::pipe(ready) != 0) outOfDescriptors();
    done_ = done[0];
    ready_ = ready[0];
    for (int i = 0; i < count; ++i) {
      int start[2];
      if (::pipe(start) != 0) outOfDescriptors();
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(start[1]);
        const Clock::time_point deadline =
            Clock::now() + std::chrono::seconds(absl::GetFlag(FLAGS_timeout_s));
        std::string port;
        bool ok = readExactly(start[0], 2, deadline, &port);
        if (ok) {
          const uint16_t number = static_cast<uint16_t>(static_cast<uint8_t>(port[0]) |
                                                        (static_cast<uint8_t>(port[1]) << 8));
          ok = body(
              i, number, [&] { writeByte(ready[1], 'r'); },
              [&] { return readExactly(start[0], 1, deadline); });
        }
        if (ok) writeByte(done[1], 'd');
        // Skip the parent's static destructors and atexit handlers.
        ::_exit(ok ? 0 : 1);
      }
      ::close(start[0]);
      pids_.push_back(pid);
      starts_.push_back(start[1]);
    }
    ::close(done[1]);
    ::close(ready[1]);
  }

  ~Clients() {
    for (int fd : starts_) ::close(fd);
    ::close(done_);
    ::close(ready_);
    for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }

  void sendPort(uint16_t port) {
    const char bytes[2] = {static_cast<char>(port & 0xff), static_cast<char>(port >> 8)};
    for (int fd : starts_) {
      [[maybe_unused]] const ssize_t n = ::write(fd, bytes, 2);
    }
  }
  void sendStart() {
    for (int fd : starts_) writeByte(fd, 'g');
  }
  bool awaitReady(Clock::time_point deadline) {
    return readExactly(ready_, pids_.size(), deadline);
  }
  bool awaitDone(Clock::time_point deadline) { return readExactly(done_, pids_.size(), deadline); }

 private:
  std::vector<pid_t> pids_;
  std::vector<int> starts_;
  int done_ = -1;
  int ready_ = -1;
};

Clock::time_point runDeadline() {
  return Clock::now() + std::chrono::seconds(absl::GetFlag(FLAGS_timeout_s));
}

std::unique_ptr<TCPStore> connect(uint16_t port) {
  TCPStoreOptions options;
  options.port = port;
  options.timeout = timeout();
  absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create(options);
  if (!store.ok()) {
    std::fprintf(stderr, "client: %s\n", store.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*store);
}

std::unique_ptr<TCPStore> startServer() {
  TCPStoreOptions options;
  options.is_server = true;
  options.timeout = timeout();
  absl::StatusOr<std::unique_ptr<TCPStore>> store = TCPStore::create(options);
  if (!store.ok()) {
    std::fprintf(stderr, "server: %s\n", store.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*store);
}

// The rendezvous workload of store_bench_torch.py: n clients connect, count
// themselves in and wait until the last sets "go".
std::optional<double> storeRendezvous(int n) {
  Clients clients(n, [n](int, uint16_t port, const auto&, const auto&) {
    std::unique_ptr<TCPStore> store = connect(port);
    if (store == nullptr) return false;
    absl::StatusOr<int64_t> arrived = store->add("arrived", 1);
    if (!arrived.ok()) return false;
    if (*arrived == n && !store->setString("go", "1").ok()) return false;
    return store->wait({"go"}).ok();
  });
  std::unique_ptr<TCPStore> server = startServer();
  const Clock::time_point start = Clock::now();
  clients.sendPort(server->port());
  if (!clients.awaitDone(runDeadline())) return std::nullopt;
  return secondsSince(start);
}

// The full rendezvous of the tcp:// init method: n ranks, rank 0 serving.
std::optional<double> urlRendezvous(int n) {
  Clients clients(n, [n](int rank, uint16_t port, const auto& ready, const auto& wait_start) {
    RendezvousOptions options;
    options.timeout = timeout();
    absl::StatusOr<RendezvousResult> result = rendezvous(
        absl::StrCat("tcp://127.0.0.1:", port, "?rank=", rank, "&world_size=", n), options);
    if (!result.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, result.status().ToString().c_str());
      return false;
    }
    // Rank 0 serves the store; everyone stays until all are through.
    ready();
    return wait_start();
  });
  // Rank 0 listens on this port: the kernel picked it free a moment ago.
  absl::StatusOr<std::pair<UniqueFd, uint16_t>> probe = listenTcp("127.0.0.1", 0);
  if (!probe.ok()) return std::nullopt;
  const uint16_t port = probe->second;
  probe->first.reset();
  const Clock::time_point start = Clock::now();
  clients.sendPort(port);
  if (!clients.awaitReady(runDeadline())) return std::nullopt;
  const double elapsed = secondsSince(start);
  clients.sendStart();
  if (!clients.awaitDone(runDeadline())) return std::nullopt;
  return elapsed;
}

std::optional<double> throughput(const std::string& op, int count, int ops) {
  Clients clients(count, [&](int index, uint16_t port, const auto& ready, const auto& wait_start) {
    std::unique_ptr<TCPStore> store = connect(port);
    if (store == nullptr) return false;
    const std::string key = absl::StrCat("key/", index);
    if (!store->set(key, kValue).ok()) return false;
    ready();
    if (!wait_start()) return false;
    bool ok = true;
    if (op == "set") {
      for (int i = 0; i < ops; ++i) ok = ok && store->set(key, kValue).ok();
      // set does not wait for the server; one reply makes sure all landed.
      ok = ok && store->check({key}).ok();
    } else if (op == "get") {
      for (int i = 0; i < ops; ++i) ok = ok && store->get(key).ok();
    } else {
      for (int i = 0; i < ops; ++i) ok = ok && store->add("counter", 1).ok();
    }
    return ok;
  });
  std::unique_ptr<TCPStore> server = startServer();
  clients.sendPort(server->port());
  if (!clients.awaitReady(runDeadline())) return std::nullopt;
  const Clock::time_point start = Clock::now();
  clients.sendStart();
  if (!clients.awaitDone(runDeadline())) return std::nullopt;
  return count * ops / secondsSince(start);
}

std::optional<double> median(std::vector<std::optional<double>> runs) {
  std::vector<double> values;
  for (const std::optional<double>& run : runs) {
    if (!run.has_value()) return std::nullopt;
    values.push_back(*run);
  }
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::vector<int> parseCounts(const std::string& text) {
  std::vector<int> counts;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int count = 0;
    if (!absl::SimpleAtoi(item, &count) || count < 1) {
      std::fprintf(stderr, "bad count '%s'\n", std::string(item).c_str());
      std::exit(2);
    }
    counts.push_back(count);
  }
  return counts;
}

// The PyTorch half (store_bench_torch.py), kept running so that its runs
// can alternate with loom's: drifting load on a shared machine then hits
// both alike.
class TorchPeer {
 public:
  TorchPeer() {
    int to_peer[2];
    int from_peer[2];
    if (::pipe2(to_peer, O_CLOEXEC) != 0 || ::pipe2(from_peer, O_CLOEXEC) != 0) {
      return;
    }
    const std::string python = absl::GetFlag(FLAGS_python);
    const std::string script = absl::GetFlag(FLAGS_torch_script);
    const std::string timeout = absl::StrCat("--timeout_s=", absl::GetFlag(FLAGS_timeout_s));
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to_peer[0], STDIN_FILENO);
      ::dup2(from_peer[1], STDOUT_FILENO);
      ::execl(python.c_str(), python.c_str(), script.c_str(), timeout.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_peer[0]);
    ::close(from_peer[1]);
    to_ = to_peer[1];
    from_ = from_peer[0];
    // Importing torch takes a while.
    const std::optional<std::string> hello = readLine(runDeadline());
    if (hello.has_value() && absl::StartsWith(*hello, "version ")) {
      version_ = hello->substr(8);
    } else {
      std::fprintf(stderr, "%s %s did not start; skipping PyTorch\n", python.c_str(),
                   script.c_str());
      stop();
    }
  }

  ~TorchPeer() { stop(); }

  bool running() const { return pid_ > 0; }
  const std::string& version() const { return version_; }

  std::optional<double> ask(const std::string& command) {
    if (!running()) return std::nullopt;
    const std::string line = command + "\n";
    if (::write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return std::nullopt;
    }
    const std::optional<std::string> answer = readLine(runDeadline());
    double value = 0;
    if (!answer.has_value() || !absl::SimpleAtod(*answer, &value)) {
      std::fprintf(stderr, "PyTorch %s: %s\n", command.c_str(),
                   answer.value_or("no answer").c_str());
      return std::nullopt;
    }
    return value;
  }

 private:
  std::optional<std::string> readLine(Clock::time_point deadline) {
    while (true) {
      if (size_t newline = buffered_.find('\n'); newline != std::string::npos) {
        std::string line = buffered_.substr(0, newline);
        buffered_.erase(0, newline + 1);
        return line;
      }
      std::string chunk;
      if (!readExactly(from_, 1, deadline, &chunk)) return std::nullopt;
      buffered_ += chunk;
    }
  }

  void stop() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    to_ = from_ = -1;
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }

  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  std::string buffered_;
  std::string version_ = "not run";
};

std::string millis(std::optional<double> seconds) {
  return seconds.has_value() ? absl::StrFormat("%.1f ms", *seconds * 1e3) : "failed";
}

std::string rate(std::optional<double> ops) {
  return ops.has_value() ? absl::StrFormat("%.0f", *ops) : "-";
}

int run() {
  const std::vector<int> sizes = parseCounts(absl::GetFlag(FLAGS_rendezvous_sizes));
  const std::vector<int> counts = parseCounts(absl::GetFlag(FLAGS_client_counts));
  const int ops = absl::GetFlag(FLAGS_ops);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::unique_ptr<TorchPeer> torch;
  if (absl::GetFlag(FLAGS_torch)) torch = std::make_unique<TorchPeer>();
  const auto askTorch = [&](const std::string& command) {
    return torch != nullptr ? torch->ask(command) : std::nullopt;
  };

  struct RendezvousRow {
    std::vector<std::optional<double>> store, url, torch;
  };
  std::map<int, RendezvousRow> rendezvous_rows;
  for (int n : sizes) {
    std::fprintf(stderr, "rendezvous of %d processes...\n", n);
    RendezvousRow& row = rendezvous_rows[n];
    for (int i = 0; i < repeats; ++i) {
      row.store.push_back(storeRendezvous(n));
      row.url.push_back(urlRendezvous(n));
      if (torch != nullptr) {
        row.torch.push_back(askTorch(absl::StrCat("rendezvous ", n)));
      }
    }
  }
  struct RateRow {
    std::vector<std::optional<double>> loom, torch;
  };
  std::map<std::pair<std::string, int>, RateRow> rate_rows;
  for (const char* op : {"set", "get", "add"}) {
    for (int count : counts) {
      std::fprintf(stderr, "%s throughput with %d clients...\n", op, count);
      RateRow& row = rate_rows[{op, count}];
      for (int i = 0; i < repeats; ++i) {
        row.loom.push_back(throughput(op, count, ops));
        if (torch != nullptr) {
          row.torch.push_back(askTorch(absl::StrCat("throughput ", op, " ", count, " ", ops)));
        }
      }
    }
  }

  std::printf(
      "TCPStore benchmark: loom vs torch.distributed (torch %s), %ld CPUs, "
      "median of %d runs, loom and torch runs alternating\n\n",
      torch != nullptr ? torch->version().c_str() : "not run", ::sysconf(_SC_NPROCESSORS_ONLN),
      repeats);
  std::printf(
      "Rendezvous: N client processes connect, add 1 to a counter and wait "
      "for the last to set \"go\"; and loom's full tcp:// rendezvous of N "
      "ranks\n\n");
  std::printf(
      "| processes | loom TCPStore | torch TCPStore | loom tcp:// rendezvous "
      "|\n");
  std::printf("|---:|---:|---:|---:|\n");
  for (const auto& [n, row] : rendezvous_rows) {
    std::printf("| %d | %s | %s | %s |\n", n, millis(median(row.store)).c_str(),
                torch != nullptr ? millis(median(row.torch)).c_str() : "-",
                millis(median(row.url)).c_str());
  }
  std::printf(
      "\nThroughput: C client processes each make %d calls (64-byte values; "
      "own key for set/get, one shared counter for add); calls/s in total\n\n",
      ops);
  std::printf("| op | clients | loom | torch | loom / torch |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const char* op : {"set", "get", "add"}) {
    for (int count : counts) {
      const RateRow& row = rate_rows[{op, count}];
      const std::optional<double> mine = median(row.loom);
      const std::optional<double> theirs = median(row.torch);
      const std::string ratio =
          mine.has_value() && theirs.has_value() ? absl::StrFormat("%.2fx", *mine / *theirs) : "-";
      std::printf("| %s | %d | %s | %s | %s |\n", op, count, rate(mine).c_str(),
                  rate(theirs).c_str(), ratio.c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace loom::comm

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Compares loom's TCPStore with torch.distributed.TCPStore.\n"
      "  bazel run -c opt //comm:store_bench");
  absl::ParseCommandLine(argc, argv);
  return loom::comm::run();
}
