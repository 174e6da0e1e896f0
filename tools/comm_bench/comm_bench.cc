// comm-bench: collective bandwidth of a ProcessGroup backend, after
// nccl-tests. One descriptor per collective says how a byte size becomes
// buffers, how the data is set up and checked, the bus-bandwidth factor and
// how the call is made; one driver sweeps sizes and prints, on rank 0, rows
// of size, count, dtype, time, algbw, busbw and #wrong for the out-of-place
// and the in-place form, with an average-busbw footer. docs/comm_bench.md
// explains the columns and the factors.
//
//   bazel run -c opt //tools:launch -- --nproc=4 --
//       bazel-bin/tools/comm_bench/comm-bench -b 4K -e 64M -f 2 --op=all_reduce
//
// With --backend=nccl the buffers are CUDA memory on GPU LOCAL_RANK and the
// calls are timed with CUDA events on the caller's stream; without a usable
// GPU it exits 3 ("comm-bench: skipped: no usable GPU: ...").
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "comm/all_backends.h"
#include "comm/gloo/gloo_backend.h"
#include "comm/gloo/gloo_reduce.h"
#include "comm/gloo/gloo_store.h"
#include "comm/nccl/cuda_util.h"
#include "comm/nccl/nccl_backend.h"
#include "comm/prefix_store.h"
#include "comm/process_group.h"
#include "comm/reduce_op.h"
#include "comm/rendezvous.h"
#include "comm/tensor.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/broadcast.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "tools/launch/rank_env.h"

ABSL_FLAG(std::string, b, "4K", "smallest size in bytes (suffixes K, M, G)");
ABSL_FLAG(std::string, e, "64M", "largest size in bytes (suffixes K, M, G)");
ABSL_FLAG(int, f, 2, "multiplication factor between sizes");
ABSL_FLAG(int, n, 20, "timed iterations per size");
ABSL_FLAG(int, w, 5, "warm-up iterations per size (not timed)");
ABSL_FLAG(int, c, 1, "check the results (1) or not (0)");
ABSL_FLAG(int, z, 0, "0: issue all -n calls, then wait; 1: wait for each call (blocking)");
ABSL_FLAG(std::string, d, "f32", "dtype: f32, f64, i32 or i64");
ABSL_FLAG(std::string, o, "sum", "reduce op: sum, prod, min, max or avg");
ABSL_FLAG(int, r, 0, "root of broadcast, reduce, gather and scatter");
ABSL_FLAG(std::string, op, "all_reduce",
          "all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, reduce, gather, "
          "scatter, or all");
ABSL_FLAG(std::string, backend, "gloo",
          "the group's backend: gloo or mpi (host buffers), or nccl (CUDA buffers on GPU "
          "LOCAL_RANK; exits 3 when no GPU is usable)");
ABSL_FLAG(std::string, checks, "",
          "cross-rank debug checks: off, cheap or detail (empty: the group default, "
          "LOOM_COMM_CHECKS or cheap)");
ABSL_FLAG(bool, direct, false,
          "call Gloo's algorithms directly on a raw Gloo context instead of the "
          "ProcessGroup (all_reduce, all_gather, broadcast): the wrapper's overhead");
ABSL_FLAG(int, timeout_s, 300, "bound on the rendezvous and on every call");

namespace loom::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Exit code of a run that could not happen here (--backend=nccl without a
// usable GPU), as calibrate's --device=gpu.
constexpr int kSkippedExitCode = 3;

// Everything a collective needs to know about the run.
struct Params {
  int rank = 0;
  int size = 1;
  int root = 0;
  ReduceOp op = ReduceOp::kSum;
  DType dtype = DType::kFloat32;
};

// Where input and output lie, in elements. Out of place they are two
// buffers of `in_count` and `out_count` elements; in place one buffer of
// max(in_count, out_count) holds the input at `in_offset` and the output at
// `out_offset`, as nccl-tests lays them out.
struct Layout {
  int64_t in_count = 0;
  int64_t out_count = 0;
  int64_t in_offset = 0;
  int64_t out_offset = 0;
  // The element count the row reports: the collective's count argument.
  int64_t count = 0;
};

struct Views {
  Tensor input;
  Tensor output;
  bool in_place = false;
};

// The raw Gloo context of --direct: the same transport and rendezvous the
// gloo backend uses, without the ProcessGroup or the backend's worker.
struct Direct {
  std::shared_ptr<::gloo::rendezvous::Context> context;
  std::chrono::milliseconds timeout;
};

// One collective: nccl-tests' descriptor (byte count, data init, bus
// factor, run) plus the expected value of each output element.
struct Collective {
  std::string name = {};
  bool has_op = false;
  bool has_root = false;
  bool out_of_place = true;
  bool in_place = true;
  // busbw = algbw * busFactor(n): the fraction of the data each rank's
  // busiest link must carry in an optimal algorithm (docs/comm_bench.md).
  std::function<double(int)> bus_factor = {};
  // The layout for `elements` elements of the largest buffer, or nullopt
  // when the size is too small for `n` ranks.
  std::function<std::optional<Layout>(int64_t elements, int n)> layout = {};
  std::function<ProcessGroup::WorkOr(ProcessGroup&, const Views&, const Params&)> run = {};
  // Empty: no --direct form.
  std::function<void(Direct&, const Views&, const Params&)> run_direct = {};
  // The value output element `j` must hold on this rank, or nullopt when
  // the collective defines no output on this rank (reduce and gather off
  // the root).
  std::function<std::optional<double>(int64_t j, const Layout&, const Params&)> expected = {};
};

// Rank r's input element i: small integers, so every dtype and reduce op
// computes them exactly.
double inputValue(int rank, int64_t i) { return 1 + (rank + i) % 3; }

double reduceAcrossRanks(int64_t i, const Params& p) {
  double acc = inputValue(0, i);
  for (int r = 1; r < p.size; ++r) {
    const double v = inputValue(r, i);
    switch (p.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      default:
        break;
    }
  }
  if (p.op != ReduceOp::kAvg) return acc;
  const double avg = acc / p.size;
  return isFloatingPoint(p.dtype) ? avg : std::trunc(avg);
}

std::optional<Layout> equalLayout(int64_t elements) {
  if (elements == 0) return std::nullopt;
  return Layout{elements, elements, 0, 0, elements};
}

// For collectives whose big buffer holds one chunk per rank.
int64_t chunkOf(int64_t elements, int n) { return elements / n; }

Tensor view(void* data, DType dtype, int64_t count, Device device) {
  return Tensor(data, dtype, {count}, device);
}

Tensor chunk(const Tensor& t, int64_t index, int64_t count) {
  return *t.narrow(index * count, count);
}

std::vector<Tensor> chunks(const Tensor& t, int n) {
  std::vector<Tensor> out;
  const int64_t c = t.numel() / n;
  for (int r = 0; r < n; ++r) out.push_back(chunk(t, r, c));
  return out;
}

template <typename T>
T* typed(const Tensor& t) {
  return static_cast<T*>(t.data());
}

std::vector<Collective> collectives() {
  std::vector<Collective> all;
  auto ring = [](int n) { return static_cast<double>(n - 1) / n; };

  all.push_back({
      .name = "all_reduce",
      .has_op = true,
      .out_of_place = false,  // our API reduces in place, as c10d's
      .bus_factor = [](int n) { return 2.0 * (n - 1) / n; },
      .layout = [](int64_t e, int) { return equalLayout(e); },
      .run = [](ProcessGroup& g, const Views& v,
                const Params& p) { return g.allReduce(v.output, {.op = p.op}); },
      .run_direct =
          [](Direct& d, const Views& v, const Params& p) {
            ::gloo::AllreduceOptions opts(d.context);
            gloo::visitDType(p.dtype, [&](auto tag) {
              using T = decltype(tag);
              opts.setOutput(typed<T>(v.output), static_cast<size_t>(v.output.numel()));
            });
            opts.setReduceFunction(*gloo::reduceFunction(p.op, p.dtype));
            opts.setTimeout(d.timeout);
            ::gloo::allreduce(opts);
          },
      .expected = [](int64_t j, const Layout&, const Params& p) -> std::optional<double> {
        return reduceAcrossRanks(j, p);
      },
  });

  all.push_back({
      .name = "all_gather",
      .bus_factor = ring,
      .layout = [](int64_t e, int n) -> std::optional<Layout> {
        const int64_t c = chunkOf(e, n);
        if (c == 0) return std::nullopt;
        return Layout{c, c * n, /*in_offset=*/-1, 0, c};  // in place: own chunk
      },
      .run = [](ProcessGroup& g, const Views& v,
                const Params&) { return g.allGatherIntoTensor(v.output, v.input); },
      .run_direct =
          [](Direct& d, const Views& v, const Params& p) {
            ::gloo::AllgatherOptions opts(d.context);
            auto* out = static_cast<uint8_t*>(v.output.data());
            if (v.input.data() != out + p.rank * v.input.nbytes()) {
              opts.setInput(static_cast<uint8_t*>(v.input.data()), v.input.nbytes());
            }
            opts.setOutput(out, v.output.nbytes());
            opts.setTimeout(d.timeout);
            ::gloo::allgather(opts);
          },
      .expected = [](int64_t j, const Layout& l, const Params&) -> std::optional<double> {
        return inputValue(static_cast<int>(j / l.in_count), j % l.in_count);
      },
  });

  all.push_back({
      .name = "reduce_scatter",
      .has_op = true,
      .bus_factor = ring,
      .layout = [](int64_t e, int n) -> std::optional<Layout> {
        const int64_t c = chunkOf(e, n);
        if (c == 0) return std::nullopt;
        return Layout{c * n, c, 0, /*out_offset=*/-1, c};  // in place: own chunk
      },
      .run =
          [](ProcessGroup& g, const Views& v, const Params& p) {
            // In place the output is this rank's own chunk of the input, as
            // c10d's reduce_scatter_tensor allows.
            return g.reduceScatterTensor(v.output, v.input, {.op = p.op});
          },
      .expected = [](int64_t j, const Layout& l, const Params& p) -> std::optional<double> {
        return reduceAcrossRanks(p.rank * l.out_count + j, p);
      },
  });

  all.push_back({
      .name = "broadcast",
      .has_root = true,
      .out_of_place = false,  // our API broadcasts in place, as c10d's
      .bus_factor = [](int) { return 1.0; },
      .layout = [](int64_t e, int) { return equalLayout(e); },
      .run = [](ProcessGroup& g, const Views& v,
                const Params& p) { return g.broadcast(v.output, {.root = p.root}); },
      .run_direct =
          [](Direct& d, const Views& v, const Params& p) {
            ::gloo::BroadcastOptions opts(d.context);
            opts.setOutput(static_cast<uint8_t*>(v.output.data()), v.output.nbytes());
            opts.setRoot(p.root);
            opts.setTimeout(d.timeout);
            ::gloo::broadcast(opts);
          },
      .expected = [](int64_t j, const Layout&, const Params& p) -> std::optional<double> {
        return inputValue(p.root, j);
      },
  });

  all.push_back({
      .name = "all_to_all",
      .in_place = false,  // c10d's all_to_all_single has no in-place form
      .bus_factor = ring,
      .layout = [](int64_t e, int n) -> std::optional<Layout> {
        const int64_t c = chunkOf(e, n);
        if (c == 0) return std::nullopt;
        return Layout{c * n, c * n, 0, 0, c * n};
      },
      .run = [](ProcessGroup& g, const Views& v,
                const Params&) { return g.allToAllSingle(v.output, v.input); },
      .expected = [](int64_t j, const Layout& l, const Params& p) -> std::optional<double> {
        const int64_t c = l.out_count / p.size;
        return inputValue(static_cast<int>(j / c), p.rank * c + j % c);
      },
  });

  all.push_back({
      .name = "reduce",
      .has_op = true,
      .has_root = true,
      .out_of_place = false,  // our API reduces in place, as c10d's
      .bus_factor = [](int) { return 1.0; },
      .layout = [](int64_t e, int) { return equalLayout(e); },
      .run = [](ProcessGroup& g, const Views& v,
                const Params& p) { return g.reduce(v.output, {.root = p.root, .op = p.op}); },
      .expected = [](int64_t j, const Layout&, const Params& p) -> std::optional<double> {
        if (p.rank != p.root) return std::nullopt;
        return reduceAcrossRanks(j, p);
      },
  });

  all.push_back({
      .name = "gather",
      .has_root = true,
      .in_place = false,  // c10d's gather takes a list of separate outputs
      .bus_factor = ring,
      .layout = [](int64_t e, int n) -> std::optional<Layout> {
        const int64_t c = chunkOf(e, n);
        if (c == 0) return std::nullopt;
        return Layout{c, c * n, 0, 0, c};
      },
      .run =
          [](ProcessGroup& g, const Views& v, const Params& p) {
            std::vector<Tensor> outputs;
            if (p.rank == p.root) outputs = chunks(v.output, p.size);
            return g.gather(std::move(outputs), v.input, {.root = p.root});
          },
      .expected = [](int64_t j, const Layout& l, const Params& p) -> std::optional<double> {
        if (p.rank != p.root) return std::nullopt;
        return inputValue(static_cast<int>(j / l.in_count), j % l.in_count);
      },
  });

  all.push_back({
      .name = "scatter",
      .has_root = true,
      .in_place = false,  // c10d's scatter takes a list of separate inputs
      .bus_factor = ring,
      .layout = [](int64_t e, int n) -> std::optional<Layout> {
        const int64_t c = chunkOf(e, n);
        if (c == 0) return std::nullopt;
        return Layout{c * n, c, 0, 0, c};
      },
      .run =
          [](ProcessGroup& g, const Views& v, const Params& p) {
            std::vector<Tensor> inputs;
            if (p.rank == p.root) inputs = chunks(v.input, p.size);
            return g.scatter(v.output, std::move(inputs), {.root = p.root});
          },
      .expected = [](int64_t j, const Layout& l, const Params& p) -> std::optional<double> {
        return inputValue(p.root, p.rank * l.out_count + j);
      },
  });
  return all;
}

// Typed element access for the dtypes comm-bench fills and checks.
template <typename F>
void visitBenchType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      f(double{});
      return;
    case DType::kInt32:
      f(int32_t{});
      return;
    case DType::kInt64:
      f(int64_t{});
      return;
    default:
      f(float{});
      return;
  }
}

void fillInput(const Tensor& t, const Params& p) {
  visitBenchType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = typed<T>(t);
    for (int64_t i = 0; i < t.numel(); ++i) data[i] = static_cast<T>(inputValue(p.rank, i));
  });
}

// A value no collective produces from inputValue's, so that an output the
// collective never wrote counts as wrong.
void fillSentinel(const Tensor& t, const Params& p) {
  visitBenchType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(typed<T>(t), t.numel(), static_cast<T>(-7));
  });
}

int64_t countWrong(const Collective& coll, const Tensor& out, const Layout& layout,
                   const Params& p) {
  int64_t wrong = 0;
  visitBenchType(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* data = typed<T>(out);
    for (int64_t j = 0; j < out.numel(); ++j) {
      const std::optional<double> want = coll.expected(j, layout, p);
      if (!want) return;
      const double got = static_cast<double>(data[j]);
      if (std::abs(got - *want) > 1e-5 * std::max(1.0, std::abs(*want))) ++wrong;
    }
  });
  return wrong;
}

// CUDA memory of one buffer, freed with it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  absl::Status allocate(size_t bytes) {
    reset();
    return nccl::cudaStatus(cudaMalloc(&data_, std::max<size_t>(bytes, 1)),
                            absl::StrCat("cudaMalloc of ", bytes, " bytes for the buffers"));
  }
  void* data() const { return data_; }

 private:
  void reset() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
  }
  void* data_ = nullptr;
};

// The GPU side of --backend=nccl: this rank's device, the caller stream every
// call is ordered after (made current for the group), and the timing events.
class GpuRun {
 public:
  static absl::StatusOr<std::unique_ptr<GpuRun>> create(int local_rank) {
    int count = 0;
    if (absl::Status s = nccl::cudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
        !s.ok()) {
      return s;
    }
    if (local_rank >= count) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--backend=nccl: LOCAL_RANK ", local_rank, " has no GPU: ", count,
          " visible; start at most one rank per GPU (NCCL cannot put two ranks of a group on one "
          "GPU)"));
    }
    auto gpu = std::unique_ptr<GpuRun>(new GpuRun());
    gpu->device_ = local_rank;
    cudaDeviceProp prop{};
    absl::Status s =
        nccl::cudaStatus(cudaGetDeviceProperties(&prop, local_rank), "cudaGetDeviceProperties");
    if (s.ok()) s = nccl::cudaStatus(cudaSetDevice(local_rank), "cudaSetDevice");
    if (s.ok()) {
      s = nccl::cudaStatus(cudaStreamCreateWithFlags(&gpu->stream_, cudaStreamNonBlocking),
                           "cudaStreamCreateWithFlags");
    }
    if (s.ok()) s = nccl::cudaStatus(cudaEventCreate(&gpu->start_), "cudaEventCreate");
    if (s.ok()) s = nccl::cudaStatus(cudaEventCreate(&gpu->stop_), "cudaEventCreate");
    if (!s.ok()) return s;
    gpu->name_ = prop.name;
    nccl::setCurrentCudaStream(gpu->stream_);
    return gpu;
  }

  ~GpuRun() {
    nccl::setCurrentCudaStream(nullptr);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  GpuRun(const GpuRun&) = delete;
  GpuRun& operator=(const GpuRun&) = delete;

  Device device() const { return Device::cuda(device_); }
  const std::string& name() const { return name_; }
  cudaStream_t stream() const { return stream_; }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

  // Copies on the caller stream, so that calls issued later (which wait for
  // that stream) see them; returns once the copy is done.
  absl::Status copy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind) const {
    if (absl::Status s =
            nccl::cudaStatus(cudaMemcpyAsync(to, from, bytes, kind, stream_), "cudaMemcpyAsync");
        !s.ok()) {
      return s;
    }
    return nccl::cudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  GpuRun() = default;
  int device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// One rank's buffers for one size and mode. On the host they are `a` and
// `b`; on a GPU those are the host mirrors that data is filled in and
// checked on, and `device_a`/`device_b` are what the calls get.
struct Buffers {
  std::vector<uint64_t> a;
  std::vector<uint64_t> b;
  DeviceBuffer device_a;
  DeviceBuffer device_b;
  size_t a_bytes = 0;
  size_t b_bytes = 0;
  // Views into `a` and `b`.
  Views host;
  // What the collective gets: `host`, or the same layout in device memory.
  Views views;
};

Views layOut(void* a, void* b, const Layout& l, bool in_place, const Params& p, Device device) {
  if (!in_place) {
    return {view(a, p.dtype, l.in_count, device), view(b, p.dtype, l.out_count, device)};
  }
  const Tensor whole = view(a, p.dtype, std::max(l.in_count, l.out_count), device);
  // -1 offsets mean "this rank's own chunk".
  const int64_t in_off = l.in_offset < 0 ? p.rank * l.in_count : l.in_offset;
  const int64_t out_off = l.out_offset < 0 ? p.rank * l.out_count : l.out_offset;
  return {*whole.narrow(in_off, l.in_count), *whole.narrow(out_off, l.out_count),
          /*in_place=*/true};
}

absl::Status allocate(Buffers& buf, const Layout& l, bool in_place, const Params& p,
                      const GpuRun* gpu) {
  const size_t es = dtypeSize(p.dtype);
  auto words = [&](int64_t count) { return (static_cast<size_t>(count) * es + 7) / 8; };
  buf.a_bytes = static_cast<size_t>(in_place ? std::max(l.in_count, l.out_count) : l.in_count) * es;
  buf.b_bytes = in_place ? 0 : static_cast<size_t>(l.out_count) * es;
  buf.a.assign(words(buf.a_bytes / es), 0);
  buf.b.assign(words(buf.b_bytes / es), 0);
  buf.host = layOut(buf.a.data(), buf.b.data(), l, in_place, p, Device::cpu());
  if (gpu == nullptr) {
    buf.views = buf.host;
    return absl::OkStatus();
  }
  if (absl::Status s = buf.device_a.allocate(buf.a_bytes); !s.ok()) return s;
  if (!in_place) {
    if (absl::Status s = buf.device_b.allocate(buf.b_bytes); !s.ok()) return s;
  }
  buf.views = layOut(buf.device_a.data(), buf.device_b.data(), l, in_place, p, gpu->device());
  return absl::OkStatus();
}

// Sentinel in the output, then the input (which in place lies inside it);
// on a GPU the host mirrors are filled and copied up.
absl::Status initData(const Buffers& buf, const Params& p, const GpuRun* gpu) {
  fillSentinel(buf.host.output, p);
  fillInput(buf.host.input, p);
  if (gpu == nullptr) return absl::OkStatus();
  if (absl::Status s =
          gpu->copy(buf.device_a.data(), buf.a.data(), buf.a_bytes, cudaMemcpyHostToDevice);
      !s.ok()) {
    return s;
  }
  if (buf.b_bytes == 0) return absl::OkStatus();
  return gpu->copy(buf.device_b.data(), buf.b.data(), buf.b_bytes, cudaMemcpyHostToDevice);
}

// The output as the host sees it: on a GPU, copied down into its mirror.
absl::StatusOr<Tensor> hostOutput(const Buffers& buf, const GpuRun* gpu) {
  if (gpu != nullptr) {
    if (absl::Status s = gpu->copy(buf.host.output.data(), buf.views.output.data(),
                                   buf.host.output.nbytes(), cudaMemcpyDeviceToHost);
        !s.ok()) {
      return s;
    }
  }
  return buf.host.output;
}

struct Bench {
  ProcessGroup& group;
  std::optional<Direct> direct = {};
  // Set with --backend=nccl.
  std::unique_ptr<GpuRun> gpu = {};
  Params params = {};
  int iters = 20;
  int warmup = 5;
  bool check = true;
  bool blocking = false;
};

absl::Status runOnce(Bench& bench, const Collective& coll, const Views& v) {
  if (bench.direct) {
    coll.run_direct(*bench.direct, v, bench.params);
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<Work>> work = coll.run(bench.group, v, bench.params);
  if (!work.ok()) return work.status();
  // On a GPU, also order the caller's stream (which reads the output back)
  // after the call.
  if (bench.gpu != nullptr) {
    if (absl::Status s = (*work)->synchronize(); !s.ok()) return s;
  }
  return (*work)->wait();
}

// Microseconds per call of `iters` calls on the GPU, from CUDA events on the
// caller's stream: the start event before the first call, the stop event
// once Work::synchronize() has made the stream wait for every call. This is
// device time from the first call's start to the last call's end, without
// the watchdog's polling. With -z 1 the host waits for each call before the
// next, so that round trip is counted too.
absl::StatusOr<double> timeOnGpu(Bench& bench, const Collective& coll, const Views& v, int iters) {
  const GpuRun& gpu = *bench.gpu;
  if (absl::Status s =
          nccl::cudaStatus(cudaEventRecord(gpu.start(), gpu.stream()), "cudaEventRecord");
      !s.ok()) {
    return s;
  }
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < iters; ++i) {
    absl::StatusOr<std::shared_ptr<Work>> work = coll.run(bench.group, v, bench.params);
    if (!work.ok()) return work.status();
    if (bench.blocking) {
      if (absl::Status s = (*work)->wait(); !s.ok()) return s;
    }
    works.push_back(*std::move(work));
  }
  for (const auto& work : works) {
    if (absl::Status s = work->synchronize(); !s.ok()) return s;
  }
  if (absl::Status s =
          nccl::cudaStatus(cudaEventRecord(gpu.stop(), gpu.stream()), "cudaEventRecord");
      !s.ok()) {
    return s;
  }
  for (const auto& work : works) {
    if (absl::Status s = work->wait(); !s.ok()) return s;
  }
  if (absl::Status s = nccl::cudaStatus(cudaEventSynchronize(gpu.stop()), "cudaEventSynchronize");
      !s.ok()) {
    return s;
  }
  float ms = 0;
  if (absl::Status s = nccl::cudaStatus(cudaEventElapsedTime(&ms, gpu.start(), gpu.stop()),
                                        "cudaEventElapsedTime");
      !s.ok()) {
    return s;
  }
  return 1e3 * ms / iters;
}

// Runs `iters` calls; without -z 1 they are all issued before the first
// wait, as nccl-tests launches its iterations before synchronising.
absl::Status runTimed(Bench& bench, const Collective& coll, const Views& v, int iters) {
  if (bench.direct || bench.blocking) {
    for (int i = 0; i < iters; ++i) {
      if (absl::Status s = runOnce(bench, coll, v); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < iters; ++i) {
    absl::StatusOr<std::shared_ptr<Work>> work = coll.run(bench.group, v, bench.params);
    if (!work.ok()) return work.status();
    works.push_back(*std::move(work));
  }
  for (const auto& work : works) {
    if (absl::Status s = work->wait(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<T> sumAcrossRanks(ProcessGroup& group, T value) {
  std::vector<T> cell{value};
  absl::StatusOr<std::shared_ptr<Work>> work = group.allReduce(Tensor::of(cell));
  if (!work.ok()) return work.status();
  if (absl::Status s = (*work)->wait(); !s.ok()) return s;
  return cell[0];
}

absl::Status barrier(ProcessGroup& group) {
  absl::StatusOr<std::shared_ptr<Work>> work = group.barrier();
  if (!work.ok()) return work.status();
  return (*work)->wait();
}

struct Cell {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  std::optional<int64_t> wrong;  // nullopt without -c
};

// One size in one mode: warm-up, timed loop (time averaged over ranks, as
// nccl-tests' default), then a checked call on fresh data.
absl::StatusOr<Cell> measure(Bench& bench, const Collective& coll, const Layout& layout,
                             bool in_place, int64_t bytes) {
  const GpuRun* gpu = bench.gpu.get();
  Buffers buf;
  if (absl::Status s = allocate(buf, layout, in_place, bench.params, gpu); !s.ok()) return s;
  if (absl::Status s = initData(buf, bench.params, gpu); !s.ok()) return s;
  if (absl::Status s = runTimed(bench, coll, buf.views, bench.warmup); !s.ok()) return s;
  if (absl::Status s = barrier(bench.group); !s.ok()) return s;
  double local_us = 0;
  if (gpu != nullptr) {
    absl::StatusOr<double> us = timeOnGpu(bench, coll, buf.views, bench.iters);
    if (!us.ok()) return us.status();
    local_us = *us;
  } else {
    const Clock::time_point start = Clock::now();
    if (absl::Status s = runTimed(bench, coll, buf.views, bench.iters); !s.ok()) return s;
    local_us =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count() / bench.iters;
  }
  absl::StatusOr<double> sum_us = sumAcrossRanks(bench.group, local_us);
  if (!sum_us.ok()) return sum_us.status();
  Cell cell;
  cell.time_us = *sum_us / bench.params.size;
  cell.algbw = static_cast<double>(bytes) / 1e3 / cell.time_us;  // GB/s
  cell.busbw = cell.algbw * coll.bus_factor(bench.params.size);
  if (bench.check) {
    if (absl::Status s = initData(buf, bench.params, gpu); !s.ok()) return s;
    if (absl::Status s = runOnce(bench, coll, buf.views); !s.ok()) return s;
    absl::StatusOr<Tensor> output = hostOutput(buf, gpu);
    if (!output.ok()) return output.status();
    absl::StatusOr<int64_t> wrong =
        sumAcrossRanks<int64_t>(bench.group, countWrong(coll, *output, layout, bench.params));
    if (!wrong.ok()) return wrong.status();
    cell.wrong = *wrong;
  }
  return cell;
}

std::string formatCell(const std::optional<Cell>& cell) {
  if (!cell) return absl::StrFormat("  %10s  %7s  %7s  %6s", "n/a", "n/a", "n/a", "n/a");
  return absl::StrFormat("  %10.1f  %7.3f  %7.3f  %6s", cell->time_us, cell->algbw, cell->busbw,
                         cell->wrong ? absl::StrCat(*cell->wrong) : "N/A");
}

absl::StatusOr<int64_t> parseBytes(const std::string& text) {
  if (text.empty()) return absl::InvalidArgumentError("empty size");
  int64_t unit = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
    case 'k':
      unit = int64_t{1} << 10;
      break;
    case 'M':
    case 'm':
      unit = int64_t{1} << 20;
      break;
    case 'G':
    case 'g':
      unit = int64_t{1} << 30;
      break;
    default:
      break;
  }
  if (unit != 1) digits.pop_back();
  int64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is not a positive number of bytes (e.g. 4096, 4K, 64M)"));
  }
  return value * unit;
}

absl::StatusOr<ReduceOp> parseOp(const std::string& name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "prod") return ReduceOp::kProduct;
  if (name == "min") return ReduceOp::kMin;
  if (name == "max") return ReduceOp::kMax;
  if (name == "avg") return ReduceOp::kAvg;
  return absl::InvalidArgumentError(
      absl::StrCat("-o ", name, " is not one of sum, prod, min, max, avg"));
}

// Runs one collective over the sweep; rank 0 prints the table. Returns the
// number of wrong elements seen.
absl::StatusOr<int64_t> sweep(Bench& bench, const Collective& coll, int64_t min_bytes,
                              int64_t max_bytes, int factor) {
  const Params& p = bench.params;
  const bool print = p.rank == 0;
  const size_t es = dtypeSize(p.dtype);
  if (print) {
    absl::PrintF("#\n# %s\n", coll.name);
    absl::PrintF("#%62s%-35s  %s\n", "", "out-of-place", "in-place");
    absl::PrintF("#%11s  %12s  %6s  %6s  %4s  %10s  %7s  %7s  %6s  %10s  %7s  %7s  %6s\n", "size",
                 "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                 "algbw", "busbw", "#wrong");
    absl::PrintF("#%11s  %12s  %6s  %6s  %4s  %10s  %7s  %7s  %6s  %10s  %7s  %7s  %6s\n", "(B)",
                 "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                 "(GB/s)", "");
  }
  int64_t wrong_total = 0;
  double busbw_sum = 0;
  int busbw_cells = 0;
  for (int64_t size = min_bytes; size <= max_bytes; size *= factor) {
    const std::optional<Layout> layout = coll.layout(size / static_cast<int64_t>(es), p.size);
    if (!layout) continue;
    const int64_t bytes = std::max(layout->in_count, layout->out_count) * static_cast<int64_t>(es);
    std::optional<Cell> cells[2];
    for (int mode = 0; mode < 2; ++mode) {
      const bool in_place = mode == 1;
      if (!(in_place ? coll.in_place : coll.out_of_place)) continue;
      absl::StatusOr<Cell> cell = measure(bench, coll, *layout, in_place, bytes);
      if (!cell.ok()) return cell.status();
      cells[mode] = *cell;
      wrong_total += cell->wrong.value_or(0);
      busbw_sum += cell->busbw;
      ++busbw_cells;
    }
    if (print) {
      absl::PrintF(" %11d  %12d  %6s  %6s  %4s%s%s\n", bytes, layout->count, dtypeName(p.dtype),
                   coll.has_op ? reduceOpName(p.op) : "none",
                   coll.has_root ? absl::StrCat(p.root) : "-1", formatCell(cells[0]),
                   formatCell(cells[1]));
      std::fflush(stdout);
    }
    if (factor <= 1) break;
  }
  if (print) {
    absl::PrintF("# Out of bounds values : %d %s\n", wrong_total,
                 wrong_total == 0 ? "OK" : "FAILED");
    absl::PrintF("# Avg bus bandwidth    : %.4f GB/s\n",
                 busbw_cells == 0 ? 0.0 : busbw_sum / busbw_cells);
    std::fflush(stdout);
  }
  return wrong_total;
}

absl::StatusOr<Direct> connectDirect(std::shared_ptr<Store> store, const Params& p,
                                     absl::Duration timeout) {
  const gloo::GlooBackendOptions where = gloo::glooOptionsFromEnv();
  ::gloo::transport::tcp::attr attr;
  if (!where.iface.empty()) {
    attr.iface = where.iface;
  } else {
    attr.hostname = where.hostname;
  }
  Direct direct;
  direct.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout));
  try {
    auto device = ::gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<::gloo::rendezvous::Context>(p.rank, p.size);
    context->setTimeout(direct.timeout);
    gloo::GlooStore gloo_store(std::make_shared<PrefixStore>("comm_bench/direct", store), timeout);
    context->connectFullMesh(gloo_store, device);
    direct.context = std::move(context);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("--direct: raw gloo context: ", e.what()));
  }
  return direct;
}

// Which debug-check level the group will use and where it came from.
std::string checksSetting() {
  const std::string flag = absl::GetFlag(FLAGS_checks);
  if (!flag.empty()) return absl::StrCat(flag, " (--checks)");
  if (const char* env = std::getenv("LOOM_COMM_CHECKS")) {
    return absl::StrCat(env, " (LOOM_COMM_CHECKS)");
  }
  return "cheap (group default)";
}

// What a run ended with: the wrong elements seen, or why it was skipped.
struct Outcome {
  int64_t wrong = 0;
  std::string skipped;
};

absl::StatusOr<Outcome> run() {
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  absl::StatusOr<int64_t> min_bytes = parseBytes(absl::GetFlag(FLAGS_b));
  if (!min_bytes.ok()) return min_bytes.status();
  absl::StatusOr<int64_t> max_bytes = parseBytes(absl::GetFlag(FLAGS_e));
  if (!max_bytes.ok()) return max_bytes.status();
  absl::StatusOr<ReduceOp> op = parseOp(absl::GetFlag(FLAGS_o));
  if (!op.ok()) return op.status();
  absl::StatusOr<DType> dtype = dtypeFromName(absl::GetFlag(FLAGS_d));
  if (!dtype.ok()) return dtype.status();
  if (*dtype != DType::kFloat32 && *dtype != DType::kFloat64 && *dtype != DType::kInt32 &&
      *dtype != DType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat("-d ", absl::GetFlag(FLAGS_d),
                                                   ": comm-bench fills and checks f32, f64, i32 "
                                                   "and i64"));
  }
  if (*op == ReduceOp::kAvg && !isFloatingPoint(*dtype)) {
    return absl::InvalidArgumentError("-o avg needs a floating-point -d (f32 or f64)");
  }
  if (absl::GetFlag(FLAGS_n) < 1 || absl::GetFlag(FLAGS_w) < 0 || absl::GetFlag(FLAGS_f) < 1) {
    return absl::InvalidArgumentError("-n must be >= 1, -w >= 0 and -f >= 1");
  }
  std::vector<Collective> chosen;
  const std::string op_flag = absl::GetFlag(FLAGS_op);
  std::vector<std::string> names;
  for (Collective& coll : collectives()) {
    names.push_back(coll.name);
    if (op_flag == "all" || op_flag == coll.name) chosen.push_back(std::move(coll));
  }
  if (chosen.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--op=", op_flag, " is not one of ", absl::StrJoin(names, ", "), ", all"));
  }
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend != "gloo" && backend != "mpi" && backend != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend=", backend, " is not gloo, mpi or nccl"));
  }
  const bool on_gpu = backend == "nccl";
  const bool direct = absl::GetFlag(FLAGS_direct);
  if (direct && backend != "gloo") {
    return absl::InvalidArgumentError("--direct calls Gloo; use it with --backend=gloo");
  }
  for (const Collective& coll : chosen) {
    if (direct && !coll.run_direct) {
      return absl::InvalidArgumentError(
          absl::StrCat("--direct covers all_reduce, all_gather and broadcast, not ", coll.name));
    }
  }

  if (on_gpu) {
    if (std::string reason = nccl::cudaUnavailableReason(); !reason.empty()) {
      return Outcome{.skipped = reason};
    }
  }

  absl::StatusOr<launch::RankEnv> env = launch::detectRankEnv();
  if (!env.ok()) return env.status();
  // The GPU is chosen before the group exists: the nccl backend takes the
  // calling thread's current device when the first CUDA call creates it.
  std::unique_ptr<GpuRun> gpu;
  if (on_gpu) {
    absl::StatusOr<std::unique_ptr<GpuRun>> g = GpuRun::create(env->local_rank);
    if (!g.ok()) return g.status();
    gpu = *std::move(g);
  }
  const std::string checks = absl::GetFlag(FLAGS_checks);
  if (!checks.empty()) setenv("LOOM_COMM_CHECKS", checks.c_str(), 1);
  RendezvousOptions rdv;
  rdv.timeout = timeout;
  rdv.getenv = launch::rendezvousEnv(*env);
  absl::StatusOr<RendezvousResult> r = rendezvous("env://", rdv);
  if (!r.ok()) return r.status();
  registerAllBackends();
  ProcessGroupOptions options;
  // Host buffers go to --backend. With nccl only the timing sums, the
  // checks' counts and the barriers are host tensors; they take gloo.
  options.cpu_backend = on_gpu ? "gloo" : backend;
  options.cuda_backend = "nccl";
  options.timeout = timeout;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
      ProcessGroup::create(r->store, r->rank, r->world_size, options);
  if (!group.ok()) return group.status();

  Bench bench{.group = **group};
  bench.params = {.rank = r->rank,
                  .size = r->world_size,
                  .root = absl::GetFlag(FLAGS_r),
                  .op = *op,
                  .dtype = *dtype};
  if (bench.params.root < 0 || bench.params.root >= r->world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("-r ", bench.params.root, " is outside [0, ", r->world_size, ")"));
  }
  bench.iters = absl::GetFlag(FLAGS_n);
  bench.warmup = absl::GetFlag(FLAGS_w);
  bench.check = absl::GetFlag(FLAGS_c) != 0;
  bench.blocking = absl::GetFlag(FLAGS_z) != 0;
  bench.gpu = std::move(gpu);
  if (direct) {
    absl::StatusOr<Direct> d = connectDirect(r->store, bench.params, timeout);
    if (!d.ok()) return d.status();
    bench.direct = *std::move(d);
  }
  if (r->rank == 0) {
    const std::string where =
        bench.gpu != nullptr
            ? absl::StrCat(" on ", bench.gpu->device().toString(), " (", bench.gpu->name(),
                           "; rank r uses GPU LOCAL_RANK), timed with CUDA events")
            : "";
    absl::PrintF("# comm-bench: %d ranks (%s), backend %s%s%s, checks %s\n", r->world_size,
                 launch::rankEnvSourceName(env->source), backend, where,
                 direct ? " called directly (--direct, no ProcessGroup)" : "", checksSetting());
    absl::PrintF("# sizes %s..%s x%d, -n %d, -w %d per size, -c %d, -z %d, -d %s, -o %s, -r %d\n",
                 absl::GetFlag(FLAGS_b), absl::GetFlag(FLAGS_e), absl::GetFlag(FLAGS_f),
                 bench.iters, bench.warmup, bench.check ? 1 : 0, bench.blocking ? 1 : 0,
                 dtypeName(*dtype), absl::GetFlag(FLAGS_o), bench.params.root);
    absl::PrintF(
        "# time: mean over ranks of (%s of -n calls) / n; algbw = size / time; "
        "busbw = algbw * bus factor\n",
        bench.gpu != nullptr ? "CUDA-event time" : "wall time");
  }
  Outcome outcome;
  for (const Collective& coll : chosen) {
    absl::StatusOr<int64_t> w = sweep(bench, coll, *min_bytes, *max_bytes, absl::GetFlag(FLAGS_f));
    if (!w.ok()) return w.status();
    outcome.wrong += *w;
  }
  if (absl::Status s = barrier(bench.group); !s.ok()) return s;
  return outcome;
}

}  // namespace
}  // namespace loom::comm

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "collective bandwidth after nccl-tests; run one per rank, e.g.\n"
      "  launch --nproc=4 -- comm-bench -b 4K -e 64M -f 2 --op=all_reduce");
  // --help lists the flags defined in this file; absl's default looks for a
  // file named after the binary, whose name has a hyphen.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) { return file == __FILE__; };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<loom::comm::Outcome> outcome = loom::comm::run();
  if (!outcome.ok()) {
    std::fprintf(stderr, "comm-bench: %s\n", std::string(outcome.status().message()).c_str());
    return 1;
  }
  if (!outcome->skipped.empty()) {
    std::printf("comm-bench: skipped: %s (--backend=nccl needs a GPU; use gloo or mpi here)\n",
                outcome->skipped.c_str());
    return loom::comm::kSkippedExitCode;
  }
  return outcome->wrong == 0 ? 0 : 2;
}
