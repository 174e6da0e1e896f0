// MPI start-up and shut-down, the serialising lock, error conversion, and the
// dtype and reduce-op tables of the mpi backend.
#include "comm/mpi/mpi_runtime.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/deadline.h"
#include "comm/errors.h"
#include "comm/half_float.h"
#include "mpi-ext.h"

namespace loom::comm::mpi {
namespace {

enum class HalfFormat { kFloat16, kBFloat16 };

template <HalfFormat kFormat>
float toFloat(uint16_t bits) {
  return kFormat == HalfFormat::kFloat16 ? halfToFloat(bits) : bfloat16ToFloat(bits);
}

template <HalfFormat kFormat>
uint16_t fromFloat(float value) {
  return kFormat == HalfFormat::kFloat16 ? floatToHalf(value) : floatToBfloat16(value);
}

// An MPI user function (MPI_User_function) reducing 16-bit floats: each pair
// is computed in float and rounded back, as PyTorch's CPU kernels do. MIN
// and MAX propagate NaN like torch.minimum/maximum.
template <HalfFormat kFormat, ReduceOp kOp>
void reduceHalf(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = toFloat<kFormat>(a[i]);
    const float y = toFloat<kFormat>(b[i]);
    float result = 0;
    if constexpr (kOp == ReduceOp::kSum) {
      result = x + y;
    } else if constexpr (kOp == ReduceOp::kProduct) {
      result = x * y;
    } else if constexpr (kOp == ReduceOp::kMin) {
      result = (x < y || x != x) ? x : y;
    } else {
      result = (x > y || x != x) ? x : y;
    }
    b[i] = fromFloat<kFormat>(result);
  }
}

// The user ops, created once MPI is initialised: [format][sum, product, min, max].
struct HalfOps {
  MPI_Op ops[2][4] = {};
};

HalfOps& halfOps() {
  static HalfOps* const kOps = new HalfOps();
  return *kOps;
}

template <HalfFormat kFormat>
absl::Status createHalfOps(MPI_Op (&ops)[4]) {
  MPI_User_function* const functions[4] = {
      &reduceHalf<kFormat, ReduceOp::kSum>, &reduceHalf<kFormat, ReduceOp::kProduct>,
      &reduceHalf<kFormat, ReduceOp::kMin>, &reduceHalf<kFormat, ReduceOp::kMax>};
  for (int i = 0; i < 4; ++i) {
    if (absl::Status status =
            mpiStatus(MPI_Op_create(functions[i], /*commute=*/1, &ops[i]), "MPI_Op_create");
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

// Process-wide state behind mpiProcess() and MpiLock.
struct Runtime {
  absl::Mutex mpi_mu;  // serialises MPI calls under MPI_THREAD_SERIALIZED
  bool serialized = false;
  absl::Mutex hooks_mu;
  std::map<const void*, std::function<void()>> exit_hooks ABSL_GUARDED_BY(hooks_mu);
  std::vector<std::shared_ptr<MPI_Request>> kept ABSL_GUARDED_BY(hooks_mu);
};

Runtime& runtime() {
  static Runtime* const kRuntime = new Runtime();
  return *kRuntime;
}

// The kept operations still pending after polling them for up to `grace`.
size_t pendingKeptOperations(absl::Duration grace) {
  std::vector<std::shared_ptr<MPI_Request>> kept;
  {
    absl::MutexLock lock(&runtime().hooks_mu);
    kept = runtime().kept;
  }
  const Deadline deadline = Deadline::after(grace);
  for (;;) {
    size_t pending = 0;
    for (const std::shared_ptr<MPI_Request>& request : kept) {
      if (*request == MPI_REQUEST_NULL) continue;
      int done = 0;
      MpiLock lock;
      // An error completes the request too (MPI frees it).
      if (MPI_Test(request.get(), &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) ++pending;
    }
    if (pending == 0 || deadline.expired()) return pending;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void finalizeAtExit() {
  std::map<const void*, std::function<void()>> hooks;
  {
    absl::MutexLock lock(&runtime().hooks_mu);
    hooks.swap(runtime().exit_hooks);
  }
  for (auto& [key, hook] : hooks) hook();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (const size_t pending = pendingKeptOperations(absl::Seconds(1)); pending > 0) {
    std::fprintf(stderr,
                 "loom: not calling MPI_Finalize: %zu MPI operation(s) that a broken mpi backend "
                 "gave up on are still pending (a peer process likely died), and finalising "
                 "would wait for them forever\n",
                 pending);
    return;
  }
  MPI_Finalize();
}

absl::StatusOr<MpiProcess> initialize() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return backendError(
        "backend mpi cannot start: MPI was already finalised in this process, and MPI cannot be "
        "initialised twice; create every mpi backend before MPI_Finalize");
  }
  MpiProcess process;
  if (initialized) {
    MPI_Query_thread(&process.thread_level);
  } else {
    if (absl::Status status =
            mpiStatus(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &process.thread_level),
                      "MPI_Init_thread");
        !status.ok()) {
      return status;
    }
    // Errors come back as codes (turned into Status) instead of aborting.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit(&finalizeAtExit);
  }
  if (process.thread_level < MPI_THREAD_SERIALIZED) {
    return backendError(absl::StrCat(
        "backend mpi needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (each backend calls MPI "
        "from its worker thread), but MPI granted ",
        std::string(threadLevelName(process.thread_level)),
        "; use an Open MPI built with thread support, or initialise MPI with "
        "MPI_Init_thread(MPI_THREAD_MULTIPLE) before creating the backend"));
  }
  runtime().serialized = process.thread_level < MPI_THREAD_MULTIPLE;
  MPI_Comm_rank(MPI_COMM_WORLD, &process.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &process.world_size);
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  // The compile-time MPIX_CUDA_AWARE_SUPPORT describes the headers; the
  // library loaded at run time may differ, so ask it.
  process.cuda_aware = MPIX_Query_cuda_support() == 1;
#endif
  int* tag_upper_bound = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_upper_bound, &found);
  process.tag_upper_bound = found ? *tag_upper_bound : 32767;  // the MPI minimum
  if (absl::Status status = createHalfOps<HalfFormat::kFloat16>(halfOps().ops[0]); !status.ok()) {
    return status;
  }
  if (absl::Status status = createHalfOps<HalfFormat::kBFloat16>(halfOps().ops[1]); !status.ok()) {
    return status;
  }
  return process;
}

int halfOpIndex(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct:
      return 1;
    case ReduceOp::kMin:
      return 2;
    case ReduceOp::kMax:
      return 3;
    default:
      return 0;  // sum, and avg's sum
  }
}

template <typename T>
void divideAll(void* data, int64_t numel, int size) {
  T* values = static_cast<T*>(data);
  for (int64_t i = 0; i < numel; ++i) values[i] = static_cast<T>(values[i] / size);
}

template <HalfFormat kFormat>
void divideHalf(void* data, int64_t numel, int size) {
  uint16_t* values = static_cast<uint16_t*>(data);
  for (int64_t i = 0; i < numel; ++i) {
    values[i] = fromFloat<kFormat>(toFloat<kFormat>(values[i]) / static_cast<float>(size));
  }
}

}  // namespace

absl::StatusOr<MpiProcess> mpiProcess() {
  static const absl::StatusOr<MpiProcess>* const kProcess =
      new absl::StatusOr<MpiProcess>(initialize());
  return *kProcess;
}

std::string_view threadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

MpiLock::MpiLock() : locked_(runtime().serialized) {
  if (locked_) runtime().mpi_mu.Lock();
}

MpiLock::~MpiLock() {
  if (locked_) runtime().mpi_mu.Unlock();
}

void addExitHook(const void* key, std::function<void()> hook) {
  absl::MutexLock lock(&runtime().hooks_mu);
  runtime().exit_hooks[key] = std::move(hook);
}

void removeExitHook(const void* key) {
  absl::MutexLock lock(&runtime().hooks_mu);
  runtime().exit_hooks.erase(key);
}

void keepUntilExit(std::shared_ptr<MPI_Request> request) {
  absl::MutexLock lock(&runtime().hooks_mu);
  runtime().kept.push_back(std::move(request));
}

absl::Status mpiStatus(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  int error_class = 0;
  MPI_Error_class(code, &error_class);
  return backendError(absl::StrCat(std::string(what),
                                   " failed in Open MPI: ", std::string(text, length),
                                   " (MPI error class ", error_class, ")"));
}

MPI_Datatype mpiDatatype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kFloat16:
    case DType::kBFloat16:
      return MPI_UINT16_T;
    case DType::kInt8:
      return MPI_INT8_T;
    case DType::kUInt8:
      return MPI_UINT8_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kBool:
      return MPI_C_BOOL;
  }
  return MPI_DATATYPE_NULL;
}

absl::StatusOr<MPI_Op> mpiReduceOp(ReduceOp op, DType dtype) {
  if (absl::Status status = checkReduceOpSupports(op, dtype); !status.ok()) return status;
  if (dtype == DType::kBool) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMax:
      case ReduceOp::kBor:
        return MPI_LOR;
      case ReduceOp::kBxor:
        return MPI_LXOR;
      default:
        return MPI_LAND;
    }
  }
  if (dtype == DType::kFloat16) return halfOps().ops[0][halfOpIndex(op)];
  if (dtype == DType::kBFloat16) return halfOps().ops[1][halfOpIndex(op)];
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return MPI_SUM;
    case ReduceOp::kProduct:
      return MPI_PROD;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kBand:
      return MPI_BAND;
    case ReduceOp::kBor:
      return MPI_BOR;
    case ReduceOp::kBxor:
      return MPI_BXOR;
  }
  return MPI_OP_NULL;
}

bool reducesOnHost(ReduceOp op, DType dtype) {
  return op == ReduceOp::kAvg || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

void divideBySize(void* data, DType dtype, int64_t numel, int size) {
  switch (dtype) {
    case DType::kFloat32:
      return divideAll<float>(data, numel, size);
    case DType::kFloat64:
      return divideAll<double>(data, numel, size);
    case DType::kFloat16:
      return divideHalf<HalfFormat::kFloat16>(data, numel, size);
    case DType::kBFloat16:
      return divideHalf<HalfFormat::kBFloat16>(data, numel, size);
    case DType::kInt8:
      return divideAll<int8_t>(data, numel, size);
    case DType::kUInt8:
      return divideAll<uint8_t>(data, numel, size);
    case DType::kInt32:
      return divideAll<int32_t>(data, numel, size);
    case DType::kInt64:
      return divideAll<int64_t>(data, numel, size);
    case DType::kBool:
      return;
  }
}

}  // namespace loom::comm::mpi
