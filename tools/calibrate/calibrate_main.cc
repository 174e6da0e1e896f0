// calibrate: measures this machine (GEMM throughput per dtype and shape
// class, memory bandwidth, and collective latency and bus bandwidth per
// group size through comm's ProcessGroup over N local processes) and
// writes the machine profile the planner's cost model reads instead of
// datasheet figures. docs/calibrate.md describes the method and the format.
//
//   bazel run -c opt //tools:calibrate -- --out=profiles/cpu_2core.json
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/all_backends.h"
#include "comm/process_group.h"
#include "comm/rendezvous.h"
#include "runtime/kernels/cpu/blas_core.h"
#include "nlohmann/json.hpp"
#include "tools/calibrate/alpha_beta_fit.h"
#include "tools/calibrate/collective_sweep.h"
#include "tools/calibrate/cpu_measure.h"
#include "tools/calibrate/gpu_measure.h"
#include "tools/calibrate/local_job.h"
#include "tools/calibrate/machine_profile_writer.h"
#include "tools/calibrate/measure_util.h"
#include "tools/launch/rank_env.h"

ABSL_FLAG(std::string, out, "machine_profile.json", "where to write the profile");
ABSL_FLAG(std::string, name, "",
          "the profile's name (default: cpu_<N>core on a CPU, the GPU's model on a GPU)");
ABSL_FLAG(std::string, device, "auto",
          "auto (the GPU when one is usable, else the CPU), cpu, or gpu (skips with exit "
          "code 3 when no GPU is usable)");
ABSL_FLAG(std::string, gemm_shapes, "128,1024,2048",
          "GEMM shapes MxNxK (or N for NxNxN), comma-separated; each lands in its shape class "
          "by min(m,n,k): small < 256 <= medium < 2048 <= large");
ABSL_FLAG(std::string, gemm_dtypes, "f32,bf16,f16",
          "GEMM dtypes to measure; on the CPU only f32 (Debian's OpenBLAS has no sbgemm)");
ABSL_FLAG(std::string, stream_bytes, "",
          "bytes per array of the STREAM copy/triad (default 64M on a CPU, 1G on a GPU)");
ABSL_FLAG(int, stream_threads, 0, "threads of the CPU STREAM run (0: every CPU we may use)");
ABSL_FLAG(int, repeats, 5,
          "samples per GEMM shape, STREAM kernel and collective size; results are medians");
ABSL_FLAG(double, min_time_s, 0.05, "each GEMM/STREAM sample runs at least this long");
ABSL_FLAG(std::string, group_sizes, "2,4",
          "collective group sizes, each a job of that many local processes (empty: none)");
ABSL_FLAG(std::string, kinds, "all_reduce,all_gather,reduce_scatter,broadcast",
          "collectives to measure");
ABSL_FLAG(std::string, min_bytes, "4K", "smallest collective message size (K, M, G suffixes)");
ABSL_FLAG(std::string, max_bytes, "16M", "largest collective message size");
ABSL_FLAG(int, factor, 4, "factor between collective message sizes");
ABSL_FLAG(int, iters, 10, "timed collective calls per sample");
ABSL_FLAG(int, warmup, 1, "untimed collective calls per size");
ABSL_FLAG(int, timeout_s, 300, "bound on each collective job and on every call in it");
ABSL_FLAG(std::string, launch, "", "the launcher binary (default: found in the runfiles)");
ABSL_FLAG(std::string, worker, "", "internal: 'collectives' runs one rank of a collective job");
ABSL_FLAG(std::string, worker_out, "", "internal: where rank 0 of a worker job writes results");

namespace loom::calibrate {
namespace {

constexpr int kSkippedExitCode = 3;

// Flags as parsed once, shared by the driver and the ranks.
struct Settings {
  std::vector<int> group_sizes;
  CollectiveSweepOptions sweep;
  SampleOptions sample;
};

absl::StatusOr<Settings> parseSettings() {
  Settings s;
  const std::vector<std::string> kind_names =
      absl::StrSplit(absl::GetFlag(FLAGS_kinds), ',', absl::SkipEmpty());
  for (const std::string& name : kind_names) {
    absl::StatusOr<CollectiveKind> kind = collectiveKindFromName(name);
    if (!kind.ok()) return kind.status();
    s.sweep.kinds.push_back(*kind);
  }
  absl::StatusOr<int64_t> min_bytes = parseBytes(absl::GetFlag(FLAGS_min_bytes));
  if (!min_bytes.ok()) return min_bytes.status();
  absl::StatusOr<int64_t> max_bytes = parseBytes(absl::GetFlag(FLAGS_max_bytes));
  if (!max_bytes.ok()) return max_bytes.status();
  absl::StatusOr<std::vector<int64_t>> sizes =
      sweepSizes(*min_bytes, *max_bytes, absl::GetFlag(FLAGS_factor));
  if (!sizes.ok()) return sizes.status();
  s.sweep.sizes = *sizes;
  const std::vector<std::string> group_texts =
      absl::StrSplit(absl::GetFlag(FLAGS_group_sizes), ',', absl::SkipEmpty());
  for (const std::string& text : group_texts) {
    int g = 0;
    if (!absl::SimpleAtoi(text, &g) || g < 2 || g > 256) {
      return absl::InvalidArgumentError(
          absl::StrCat("--group_sizes entry '", text, "' must be a whole number in [2, 256]"));
    }
    s.group_sizes.push_back(g);
  }
  s.sweep.iters = absl::GetFlag(FLAGS_iters);
  s.sweep.warmup = absl::GetFlag(FLAGS_warmup);
  s.sweep.repeats = absl::GetFlag(FLAGS_repeats);
  s.sample = {.repeats = absl::GetFlag(FLAGS_repeats),
              .min_time_s = absl::GetFlag(FLAGS_min_time_s)};
  if (s.sweep.iters < 1 || s.sweep.warmup < 0 || s.sample.repeats < 1 ||
      !(s.sample.min_time_s >= 0) || absl::GetFlag(FLAGS_timeout_s) < 1) {
    return absl::InvalidArgumentError(
        "--iters, --repeats and --timeout_s must be >= 1, --warmup and --min_time_s >= 0");
  }
  return s;
}

// One rank of a collective job (--worker=collectives), started by the
// driver through the launcher.
absl::Status runWorker(const Settings& settings) {
  absl::StatusOr<launch::RankEnv> env = launch::detectRankEnv();
  if (!env.ok()) return env.status();
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  comm::RendezvousOptions rdv;
  rdv.timeout = timeout;
  rdv.getenv = launch::rendezvousEnv(*env);
  absl::StatusOr<comm::RendezvousResult> r = comm::rendezvous("env://", rdv);
  if (!r.ok()) return r.status();
  comm::registerAllBackends();
  // Measure the collectives themselves, not the debug fingerprint exchange
  // (LOOM_COMM_CHECKS would override the option).
  setenv("LOOM_COMM_CHECKS", "off", 1);
  comm::ProcessGroupOptions options;
  options.timeout = timeout;
  options.checks = comm::CollectiveChecks::kOff;
  options.group_name = "calibrate";
  absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> group =
      comm::ProcessGroup::create(r->store, r->rank, r->world_size, options);
  if (!group.ok()) return group.status();
  absl::StatusOr<std::vector<MeasuredSeries>> series =
      runCollectiveSweep(**group, settings.sweep, [](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      });
  if (!series.ok()) return series.status();
  if (r->rank == 0) {
    std::ofstream out(absl::GetFlag(FLAGS_worker_out));
    out << seriesToJson(*series).dump() << "\n";
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("cannot write '", absl::GetFlag(FLAGS_worker_out), "'"));
    }
  }
  return absl::OkStatus();
}

// Runs one job per group size; returns every measured series.
absl::StatusOr<std::vector<MeasuredSeries>> measureCollectives(const Settings& settings,
                                                               const std::string& argv0) {
  std::vector<MeasuredSeries> all;
  if (settings.group_sizes.empty() || settings.sweep.kinds.empty()) return all;
  absl::StatusOr<std::string> launcher = findLauncher(absl::GetFlag(FLAGS_launch), argv0);
  if (!launcher.ok()) return launcher.status();
  absl::StatusOr<std::string> self = selfExecutable();
  if (!self.ok()) return self.status();
  const char* tmp_env = std::getenv("TMPDIR");
  std::string dir =
      absl::StrCat(tmp_env != nullptr && *tmp_env != '\0' ? tmp_env : "/tmp", "/calibrate.XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot create a temporary folder '", dir,
                                               "'; set TMPDIR to a writable folder"));
  }
  absl::Status failure;
  for (int g : settings.group_sizes) {
    std::printf("collectives over %d local processes (gloo, checks off)...\n", g);
    std::fflush(stdout);
    const std::string out = absl::StrCat(dir, "/group", g, ".json");
    LocalJob job{.launcher = *launcher,
                 .nproc = g,
                 .command = {*self, "--worker=collectives", absl::StrCat("--worker_out=", out),
                             absl::StrCat("--kinds=", absl::GetFlag(FLAGS_kinds)),
                             absl::StrCat("--min_bytes=", absl::GetFlag(FLAGS_min_bytes)),
                             absl::StrCat("--max_bytes=", absl::GetFlag(FLAGS_max_bytes)),
                             absl::StrCat("--factor=", absl::GetFlag(FLAGS_factor)),
                             absl::StrCat("--iters=", absl::GetFlag(FLAGS_iters)),
                             absl::StrCat("--warmup=", absl::GetFlag(FLAGS_warmup)),
                             absl::StrCat("--repeats=", absl::GetFlag(FLAGS_repeats)),
                             absl::StrCat("--timeout_s=", absl::GetFlag(FLAGS_timeout_s))},
                 .timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s))};
    failure = runLocalJob(job);
    if (failure.ok()) {
      std::ifstream in(out);
      absl::StatusOr<std::vector<MeasuredSeries>> series =
          seriesFromJson(nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false));
      if (series.ok()) {
        all.insert(all.end(), series->begin(), series->end());
      } else {
        failure = series.status();
      }
    }
    std::remove(out.c_str());  // a failed job may have left it too
    if (!failure.ok()) break;
  }
  ::rmdir(dir.c_str());
  if (!failure.ok()) return failure;
  return all;
}

std::string gpuShortName(const std::string& driver_name) {
  std::string name = absl::AsciiStrToLower(driver_name);
  absl::StrReplaceAll({{"nvidia ", ""}, {" ", "-"}}, &name);
  return name;
}

absl::Status runDriver(const Settings& settings, const std::string& argv0, int* exit_code) {
  const std::string device_flag = absl::GetFlag(FLAGS_device);
  if (device_flag != "auto" && device_flag != "cpu" && device_flag != "gpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", device_flag, " is not auto, cpu or gpu"));
  }
  absl::StatusOr<std::vector<GemmShape>> shapes = parseGemmShapes(absl::GetFlag(FLAGS_gemm_shapes));
  if (!shapes.ok()) return shapes.status();
  std::vector<std::string> dtypes =
      absl::StrSplit(absl::GetFlag(FLAGS_gemm_dtypes), ',', absl::SkipEmpty());
  for (const std::string& dtype : dtypes) {
    if (dtype != "f32" && dtype != "bf16" && dtype != "f16") {
      return absl::InvalidArgumentError(
          absl::StrCat("--gemm_dtypes entry '", dtype, "' is not f32, bf16 or f16"));
    }
  }

  const gpu::GpuDevice gpu_device = device_flag == "cpu" ? gpu::GpuDevice{} : gpu::probeGpu();
  bool on_gpu = false;
  if (device_flag == "gpu" && !gpu_device.unavailable_reason.empty()) {
    std::printf(
        "calibrate: skipped: %s; the GPU profile needs a machine with a GPU (here, use "
        "--device=cpu)\n",
        gpu_device.unavailable_reason.c_str());
    *exit_code = kSkippedExitCode;
    return absl::OkStatus();
  }
  if (device_flag != "cpu") {
    on_gpu = gpu_device.unavailable_reason.empty();
    if (!on_gpu) {
      std::printf("GPU: skipped (%s); calibrating the CPU\n",
                  gpu_device.unavailable_reason.c_str());
    }
  }

  MachineProfile profile;
  profile.measured_on = cpuDescription();
  profile.date = absl::FormatTime("%Y-%m-%d", absl::Now(), absl::LocalTimeZone());
  std::string stream_text = absl::GetFlag(FLAGS_stream_bytes);
  if (stream_text.empty()) stream_text = on_gpu ? "1G" : "64M";
  absl::StatusOr<int64_t> stream_bytes = parseBytes(stream_text);
  if (!stream_bytes.ok()) return stream_bytes.status();

  if (on_gpu) {
    profile.device.name = gpuShortName(gpu_device.name);
    profile.device.memory_bytes = gpu_device.memory_bytes;
    profile.measured_on = absl::StrCat(profile.measured_on, " + ", gpu_device.name);
    std::printf("device: %s (sm_%d), %.1f GiB\n", gpu_device.name.c_str(),
                gpu_device.compute_capability, gpu_device.memory_bytes / double(1 << 30));
    const gpu::GpuRate triad =
        gpu::measureGpuTriad(*stream_bytes, settings.sample.repeats, settings.sample.min_time_s);
    if (!triad.error.empty()) return absl::InternalError(absl::StrCat("GPU triad: ", triad.error));
    profile.device.memory_bandwidth_bytes_per_s = triad.per_s;
    std::printf("memory bandwidth (triad, %s per array): %.1f GB/s\n", stream_text.c_str(),
                triad.per_s / 1e9);
  } else {
    profile.device.name = "cpu";
    profile.device.memory_bytes = cpuMemoryBytes();
    const int threads =
        absl::GetFlag(FLAGS_stream_threads) > 0 ? absl::GetFlag(FLAGS_stream_threads) : cpuCount();
    absl::StatusOr<StreamBandwidth> stream =
        measureCpuStream(*stream_bytes, threads, settings.sample);
    if (!stream.ok()) return stream.status();
    profile.device.memory_bandwidth_bytes_per_s = stream->triad_bytes_per_s;
    std::printf("device: %s, %.1f GiB\n", profile.measured_on.c_str(),
                profile.device.memory_bytes / double(1 << 30));
    std::printf(
        "memory bandwidth (%d threads, %s per array): copy %.2f GB/s, triad %.2f GB/s "
        "(the profile records triad)\n",
        threads, stream_text.c_str(), stream->copy_bytes_per_s / 1e9,
        stream->triad_bytes_per_s / 1e9);
  }
  std::fflush(stdout);

  std::printf("\n%-5s  %-6s  %-16s  %12s\n", "dtype", "class", "m x n x k", "GFLOP/s");
  for (const std::string& dtype : dtypes) {
    if (!on_gpu && dtype != "f32") {
      std::printf(
          "%-5s  not measured: Debian's OpenBLAS 0.3.21 exports no cblas_sbgemm (bf16) "
          "or f16 GEMM\n",
          dtype.c_str());
      continue;
    }
    for (const GemmShape& shape : *shapes) {
      double rate = 0;
      if (on_gpu) {
        const gpu::GpuRate r = gpu::measureGpuGemm(
            dtype, shape.m, shape.n, shape.k, settings.sample.repeats, settings.sample.min_time_s);
        if (!r.error.empty()) return absl::InternalError(absl::StrCat("GPU GEMM: ", r.error));
        rate = r.per_s;
      } else {
        absl::StatusOr<double> r = measureCpuGemmF32(shape, settings.sample);
        if (!r.ok()) return r.status();
        rate = *r;
      }
      const std::string cls(shapeClass(shape.m, shape.n, shape.k));
      profile.gemm.push_back({.dtype = dtype,
                              .shape_class = cls,
                              .m = shape.m,
                              .n = shape.n,
                              .k = shape.k,
                              .flops_per_s = rate});
      std::printf("%-5s  %-6s  %-16s  %12.1f\n", dtype.c_str(), cls.c_str(),
                  absl::StrCat(shape.m, "x", shape.n, "x", shape.k).c_str(), rate / 1e9);
      std::fflush(stdout);
    }
  }
  std::printf("\n");

  absl::StatusOr<std::vector<MeasuredSeries>> series = measureCollectives(settings, argv0);
  if (!series.ok()) return series.status();
  if (!series->empty()) {
    std::printf("\n%-14s  %5s  %12s  %14s  %10s  %s\n", "collective", "ranks", "alpha (us)",
                "busbw (GB/s)", "fit rms", "points");
  }
  for (const MeasuredSeries& s : *series) {
    absl::StatusOr<AlphaBetaFit> fit = fitAlphaBeta(s.points, busFactor(s.kind, s.group_size));
    const std::string kind(collectiveKindName(s.kind));
    if (!fit.ok()) {
      std::printf("%-14s  %5d  not in the profile: %s\n", kind.c_str(), s.group_size,
                  std::string(fit.status().message()).c_str());
      continue;
    }
    ProfileCollective entry{.backend = "gloo",
                            .kind = kind,
                            .group_size = s.group_size,
                            .link_class = "intra_host",
                            .latency_s = fit->latency_s,
                            .bus_bandwidth_bytes_per_s = fit->bus_bandwidth_bytes_per_s,
                            .points = {}};
    for (const TimedPoint& p : s.points) entry.points.push_back({p.bytes, p.time_s});
    profile.collectives.push_back(std::move(entry));
    std::printf("%-14s  %5d  %12.1f  %14.3f  %9.1f%%  %zu\n", kind.c_str(), s.group_size,
                fit->latency_s * 1e6, fit->bus_bandwidth_bytes_per_s / 1e9,
                fit->rms_relative_error * 100, s.points.size());
  }

  profile.name = absl::GetFlag(FLAGS_name);
  if (profile.name.empty()) {
    profile.name = on_gpu ? profile.device.name : absl::StrCat("cpu_", cpuCount(), "core");
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (absl::Status s = writeProfile(profile, out); !s.ok()) return s;
  std::printf("\nwrote %s (profile '%s')\n", out.c_str(), profile.name.c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace loom::calibrate

int main(int argc, char** argv) {
  // The GEMMs measured are the ones train runs: the same OpenBLAS kernels.
  loom::runtime::cpu::reexecWithBetterBlasCore(argv);
  absl::SetProgramUsageMessage(
      "measures GEMM, memory and collective speed on this machine and writes the machine\n"
      "profile the planner's cost model reads (docs/calibrate.md), e.g.\n"
      "  bazel run -c opt //tools:calibrate -- --out=profiles/cpu_2core.json");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<loom::calibrate::Settings> settings = loom::calibrate::parseSettings();
  if (!settings.ok()) {
    std::fprintf(stderr, "calibrate: %s\n", std::string(settings.status().message()).c_str());
    return 2;
  }
  const std::string worker = absl::GetFlag(FLAGS_worker);
  if (!worker.empty()) {
    if (worker != "collectives") {
      std::fprintf(stderr, "calibrate: --worker=%s is not 'collectives'\n", worker.c_str());
      return 2;
    }
    absl::Status status = loom::calibrate::runWorker(*settings);
    if (!status.ok()) {
      std::fprintf(stderr, "calibrate worker: %s\n", std::string(status.message()).c_str());
      return 1;
    }
    return 0;
  }
  // Under `bazel run`, relative paths (--out) mean what they mean in the
  // user's shell.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
      dir != nullptr && ::chdir(dir) != 0) {
    std::fprintf(stderr, "calibrate: cannot change to BUILD_WORKING_DIRECTORY '%s'\n", dir);
    return 1;
  }
  int exit_code = 0;
  absl::Status status = loom::calibrate::runDriver(*settings, argv[0], &exit_code);
  if (!status.ok()) {
    std::fprintf(stderr, "calibrate: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return exit_code;
}
