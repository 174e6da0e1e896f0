// CPU GEMM, STREAM bandwidth and machine description (cpu_measure.h).
#include "tools/calibrate/cpu_measure.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cblas.h"

namespace loom::calibrate {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs `op` until min_time_s has passed, `repeats` times; returns the median
// of (calls / seconds).
template <typename Op>
double medianRate(const SampleOptions& options, Op&& op) {
  std::vector<double> rates;
  for (int r = 0; r < options.repeats; ++r) {
    int64_t calls = 0;
    const Clock::time_point start = Clock::now();
    double elapsed = 0;
    do {
      op();
      ++calls;
      elapsed = secondsSince(start);
    } while (elapsed < options.min_time_s);
    rates.push_back(static_cast<double>(calls) / elapsed);
  }
  return median(std::move(rates));
}

absl::Status checkSampleOptions(const SampleOptions& options) {
  if (options.repeats < 1 || !(options.min_time_s >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--repeats (", options.repeats,
                                                   ") must be >= 1 and --min_time_s (",
                                                   options.min_time_s, ") >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> measureCpuGemmF32(const GemmShape& shape, const SampleOptions& options) {
  if (absl::Status s = checkSampleOptions(options); !s.ok()) return s;
  const int64_t m = shape.m, n = shape.n, k = shape.k;
  constexpr int64_t kMaxDim = int64_t{1} << 30;
  if (m <= 0 || n <= 0 || k <= 0 || m > kMaxDim || n > kMaxDim || k > kMaxDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM shape ", m, "x", n, "x", k, " must have dims in [1, 2^30]"));
  }
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5f + static_cast<float>(i % 7) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.25f + static_cast<float>(i % 5) * 0.01f;
  auto gemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a.data(),
                static_cast<blasint>(k), b.data(), static_cast<blasint>(n), 0.0f, c.data(),
                static_cast<blasint>(n));
  };
  gemm();
  const double calls_per_s = medianRate(options, gemm);
  return calls_per_s * 2.0 * static_cast<double>(m) * static_cast<double>(n) *
         static_cast<double>(k);
}

absl::StatusOr<StreamBandwidth> measureCpuStream(int64_t bytes_per_array, int threads,
                                                 const SampleOptions& options) {
  if (absl::Status s = checkSampleOptions(options); !s.ok()) return s;
  const int64_t count = bytes_per_array / static_cast<int64_t>(sizeof(double));
  if (threads < 1 || count < threads) {
    return absl::InvalidArgumentError(
        absl::StrCat("STREAM: ", bytes_per_array, " bytes per array over ", threads,
                     " thread(s) leaves no work; raise --stream_bytes or use >= 1 thread"));
  }
  std::unique_ptr<double[]> a(new double[count]), b(new double[count]), c(new double[count]);
  // Runs body(begin, end) on every thread's part and waits for them.
  auto parallel = [&](auto&& body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      const int64_t begin = count * t / threads, end = count * (t + 1) / threads;
      pool.emplace_back([&body, begin, end] { body(begin, end); });
    }
    for (std::thread& thread : pool) thread.join();
  };
  parallel([&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      a[i] = 1.0;
      b[i] = 2.0;
      c[i] = 0.5;
    }
  });
  double* pa = a.get();
  double* pb = b.get();
  double* pc = c.get();
  const double scalar = 3.0;
  auto copy = [&] {
    parallel([=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) pc[i] = pa[i];
    });
  };
  auto triad = [&] {
    parallel([=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) pa[i] = pb[i] + scalar * pc[i];
    });
  };
  copy();
  triad();
  const double bytes = static_cast<double>(count) * sizeof(double);
  StreamBandwidth bw;
  bw.copy_bytes_per_s = medianRate(options, copy) * 2 * bytes;
  bw.triad_bytes_per_s = medianRate(options, triad) * 3 * bytes;
  return bw;
}

int64_t cpuMemoryBytes() {
  const int64_t physical = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) *
                           static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
  std::ifstream limit_file("/sys/fs/cgroup/memory.max");
  std::string limit_text;
  int64_t limit = 0;
  if (limit_file >> limit_text && absl::SimpleAtoi(limit_text, &limit) && limit > 0 &&
      limit < physical) {
    return limit;
  }
  return physical;
}

int cpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

std::string cpuDescription() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        model = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
      break;
    }
  }
  return absl::StrCat(host[0] != '\0' ? host : "unknown-host", "/", model, " (", cpuCount(),
                      " cores)");
}

}  // namespace loom::calibrate
