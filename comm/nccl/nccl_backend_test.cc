// Tests of the nccl backend. NCCL cannot put two ranks on one GPU, so they
// run at world size 1 on a GPU machine (comm/nccl/gpu_check.sh): every
// collective, ordering against the caller's stream, the watchdog's timeout
// and abort, and error reporting. Where no GPU is usable every case reports
// itself skipped with the reason (nccl_backend_no_gpu_test covers that case).
#include "comm/nccl/nccl_backend.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/hash_store.h"
#include "comm/nccl/cuda_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm::nccl {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

#define ASSERT_CUDA(expr)                                                   \
  do {                                                                      \
    const cudaError_t cuda_status = (expr);                                 \
    ASSERT_EQ(cuda_status, cudaSuccess) << cudaGetErrorString(cuda_status); \
  } while (0)

BackendContext contextFor(const std::string& name) {
  BackendContext context;
  context.store = std::make_shared<HashStore>(absl::Seconds(30));
  context.rank = 0;
  context.size = 1;
  context.group_name = name;
  context.global_ranks = {0};
  context.timeout = absl::Seconds(30);
  return context;
}

// Element i of a test tensor of `dtype`, as raw bytes: small finite values,
// so that every reduce op over one rank gives the input back bit for bit.
std::vector<uint8_t> pattern(DType dtype, int64_t numel, int seed) {
  std::vector<uint8_t> bytes(numel * dtypeSize(dtype));
  for (int64_t i = 0; i < numel; ++i) {
    void* p = bytes.data() + i * dtypeSize(dtype);
    const int v = static_cast<int>((i + seed) % 50);
    switch (dtype) {
      case DType::kFloat32: {
        const float f = v + 0.5f;
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kFloat64: {
        const double d = v + 0.25;
        std::memcpy(p, &d, 8);
        break;
      }
      case DType::kFloat16: {
        const uint16_t h = 0x3c00 + v;
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        const uint16_t b = 0x3f80 + v;
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kInt8: {
        const int8_t x = static_cast<int8_t>(v - 25);
        std::memcpy(p, &x, 1);
        break;
      }
      case DType::kUInt8: {
        const uint8_t x = static_cast<uint8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case DType::kInt32: {
        const int32_t x = v * 1000 - 7;
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::kInt64: {
        const int64_t x = int64_t{v} << 40;
        std::memcpy(p, &x, 8);
        break;
      }
      case DType::kBool: {
        const bool x = v % 2 == 1;
        std::memcpy(p, &x, 1);
        break;
      }
    }
  }
  return bytes;
}

// Device memory for one tensor, filled from and read back to host bytes.
class DeviceTensor {
 public:
  DeviceTensor(DType dtype, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (int64_t s : shape) numel *= s;
    cudaMalloc(&data_, std::max<size_t>(1, numel * dtypeSize(dtype)));
    tensor_ = Tensor(data_, dtype, std::move(shape), Device::cuda(0));
  }
  ~DeviceTensor() { cudaFree(data_); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  const Tensor& tensor() const { return tensor_; }
  void upload(const std::vector<uint8_t>& bytes) {
    cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> bytes(tensor_.nbytes());
    cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost);
    return bytes;
  }

 private:
  void* data_ = nullptr;
  Tensor tensor_;
};

// Blocks `stream` for `ms` milliseconds from the host, standing in for a
// long kernel of the caller's.
void blockStream(cudaStream_t stream, int ms) {
  cudaLaunchHostFunc(
      stream,
      [](void* delay) {
        const int* milliseconds = static_cast<int*>(delay);
        std::this_thread::sleep_for(std::chrono::milliseconds(*milliseconds));
        delete milliseconds;
      },
      new int(ms));
}

class NcclBackendTest : public testing::Test {
 protected:
  void SetUp() override {
    if (const std::string reason = cudaUnavailableReason(); !reason.empty()) {
      GTEST_SKIP() << reason;
    }
    ASSERT_CUDA(cudaSetDevice(0));
    ASSERT_CUDA(cudaStreamCreateWithFlags(&caller_stream_, cudaStreamNonBlocking));
    absl::StatusOr<std::unique_ptr<Backend>> backend = createNcclBackend(contextFor("default"));
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }

  void TearDown() override {
    backend_.reset();
    if (caller_stream_ != nullptr) cudaStreamDestroy(caller_stream_);
  }

  CollectiveInfo info(const std::string& op, int peer = -1) {
    return {.group = "default", .rank = 0, .group_size = 1, .seq = ++seq_, .op = op, .peer = peer};
  }

  static absl::Status run(const Backend::WorkOr& work) {
    if (!work.ok()) return work.status();
    return (*work)->wait();
  }

  std::unique_ptr<Backend> backend_;
  cudaStream_t caller_stream_ = nullptr;
  uint64_t seq_ = 0;
};

TEST_F(NcclBackendTest, AllReduceRunsEveryOpOnEveryDtypeAndRefusesBitwiseOps) {
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (!checkReduceOpSupports(op, dtype).ok()) continue;
      DeviceTensor data(dtype, {33});
      const std::vector<uint8_t> input = pattern(dtype, 33, 1);
      data.upload(input);
      const Backend::WorkOr work =
          backend_->allReduce(data.tensor(), {.op = op, .timeout = {}}, info("all_reduce"));
      if (op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor) {
        EXPECT_THAT(work.status(),
                    StatusIs(absl::StatusCode::kUnimplemented,
                             HasSubstr(absl::StrCat("backend nccl does not support reduce op ",
                                                    std::string(reduceOpName(op))))));
        continue;
      }
      ASSERT_TRUE(run(work).ok()) << run(work);
      EXPECT_EQ(data.download(), input)
          << reduceOpName(op) << " on " << dtypeName(dtype) << " over one rank";
    }
  }
}

TEST_F(NcclBackendTest, BroadcastAndReduce) {
  DeviceTensor data(DType::kFloat32, {2, 8});
  const std::vector<uint8_t> input = pattern(DType::kFloat32, 16, 3);
  data.upload(input);
  ASSERT_TRUE(
      run(backend_->broadcast(data.tensor(), {.root = 0, .timeout = {}}, info("broadcast"))).ok());
  ASSERT_TRUE(run(backend_->reduce(data.tensor(), {.root = 0, .op = ReduceOp::kMax, .timeout = {}},
                                   info("reduce")))
                  .ok());
  EXPECT_EQ(data.download(), input);
}

TEST_F(NcclBackendTest, AllGatherIntoSeparateTensorsAndIntoOneInPlace) {
  DeviceTensor input(DType::kInt32, {5});
  const std::vector<uint8_t> bytes = pattern(DType::kInt32, 5, 4);
  input.upload(bytes);
  DeviceTensor output(DType::kInt32, {5});  // not contiguous with anything: scratch path
  ASSERT_TRUE(run(backend_->allGather({output.tensor()}, input.tensor(), {.timeout = {}},
                                      info("all_gather")))
                  .ok());
  EXPECT_EQ(output.download(), bytes);
  ASSERT_TRUE(run(backend_->allGatherIntoTensor(input.tensor(), input.tensor(), {.timeout = {}},
                                                info("all_gather_into_tensor")))
                  .ok());
  EXPECT_EQ(input.download(), bytes);
}

TEST_F(NcclBackendTest, GatherAndScatter) {
  DeviceTensor input(DType::kBFloat16, {6});
  const std::vector<uint8_t> bytes = pattern(DType::kBFloat16, 6, 5);
  input.upload(bytes);
  DeviceTensor gathered(DType::kBFloat16, {6});
  ASSERT_TRUE(run(backend_->gather({gathered.tensor()}, input.tensor(), {.root = 0, .timeout = {}},
                                   info("gather")))
                  .ok());
  EXPECT_EQ(gathered.download(), bytes);
  DeviceTensor scattered(DType::kBFloat16, {6});
  ASSERT_TRUE(run(backend_->scatter(scattered.tensor(), {gathered.tensor()},
                                    {.root = 0, .timeout = {}}, info("scatter")))
                  .ok());
  EXPECT_EQ(scattered.download(), bytes);
}

TEST_F(NcclBackendTest, ReduceScatterListAndTensorWithAvg) {
  DeviceTensor input(DType::kFloat16, {12});
  const std::vector<uint8_t> bytes = pattern(DType::kFloat16, 12, 6);
  input.upload(bytes);
  DeviceTensor from_list(DType::kFloat16, {12}), from_tensor(DType::kFloat16, {12});
  ASSERT_TRUE(
      run(backend_->reduceScatter(from_list.tensor(), {input.tensor()},
                                  {.op = ReduceOp::kAvg, .timeout = {}}, info("reduce_scatter")))
          .ok());
  ASSERT_TRUE(run(backend_->reduceScatterTensor(from_tensor.tensor(), input.tensor(),
                                                {.op = ReduceOp::kAvg, .timeout = {}},
                                                info("reduce_scatter_tensor")))
                  .ok());
  EXPECT_EQ(from_list.download(), bytes);
  EXPECT_EQ(from_tensor.download(), bytes);
}

TEST_F(NcclBackendTest, AllToAllListAndSingle) {
  DeviceTensor input(DType::kInt64, {4, 2});
  const std::vector<uint8_t> bytes = pattern(DType::kInt64, 8, 7);
  input.upload(bytes);
  DeviceTensor from_list(DType::kInt64, {4, 2}), from_single(DType::kInt64, {4, 2});
  ASSERT_TRUE(run(backend_->allToAll({from_list.tensor()}, {input.tensor()}, {.timeout = {}},
                                     info("all_to_all")))
                  .ok());
  ASSERT_TRUE(run(backend_->allToAllSingle(from_single.tensor(), input.tensor(), {4}, {4},
                                           {.timeout = {}}, info("all_to_all_single")))
                  .ok());
  EXPECT_EQ(from_list.download(), bytes);
  EXPECT_EQ(from_single.download(), bytes);
}

TEST_F(NcclBackendTest, BarrierCompletes) {
  EXPECT_TRUE(run(backend_->barrier({.timeout = {}}, info("barrier"))).ok());
}

TEST_F(NcclBackendTest, CallsRunAfterTheCallersStreamAndSynchronizeOrdersItAfterThem) {
  // An out-of-place gather (a copy at world size 1) between two copies on
  // the caller's stream, all queued at once behind a busy caller stream.
  // Pinned host memory keeps both copies asynchronous, so only the events
  // order them: the gather must wait for the copy in, and synchronize()
  // must hold the copy out until the gather is done.
  constexpr size_t kBytes = 256 * sizeof(float);
  const std::vector<uint8_t> before = pattern(DType::kFloat32, 256, 0);
  const std::vector<uint8_t> later = pattern(DType::kFloat32, 256, 9);
  DeviceTensor input(DType::kFloat32, {256}), output(DType::kFloat32, {256});
  input.upload(before);
  output.upload(before);
  void* staging = nullptr;
  ASSERT_CUDA(cudaMallocHost(&staging, kBytes));
  std::memcpy(staging, later.data(), kBytes);
  blockStream(caller_stream_, 300);
  ASSERT_CUDA(cudaMemcpyAsync(input.tensor().data(), staging, kBytes, cudaMemcpyHostToDevice,
                              caller_stream_));
  CudaStreamGuard guard(caller_stream_);
  const Backend::WorkOr work = backend_->allGatherIntoTensor(
      output.tensor(), input.tensor(), {.timeout = {}}, info("all_gather_into_tensor"));
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_TRUE((*work)->synchronize().ok());
  ASSERT_CUDA(cudaMemcpyAsync(staging, output.tensor().data(), kBytes, cudaMemcpyDeviceToHost,
                              caller_stream_));
  ASSERT_CUDA(cudaStreamSynchronize(caller_stream_));
  std::vector<uint8_t> result(kBytes);
  std::memcpy(result.data(), staging, kBytes);
  cudaFreeHost(staging);
  EXPECT_EQ(result, later);
  EXPECT_TRUE((*work)->wait().ok());
}

TEST_F(NcclBackendTest, ACallPastItsTimeoutAbortsTheCommunicatorAndNamesItself) {
  DeviceTensor data(DType::kFloat32, {16});
  blockStream(caller_stream_, 2000);
  CudaStreamGuard guard(caller_stream_);
  const CollectiveInfo late = info("all_reduce");
  const absl::Time start = absl::Now();
  const Backend::WorkOr work = backend_->allReduce(
      data.tensor(), {.op = ReduceOp::kSum, .timeout = absl::Milliseconds(300)}, late);
  ASSERT_TRUE(work.ok()) << work.status();
  EXPECT_THAT((*work)->wait(absl::Seconds(10)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr(late.describe()), HasSubstr("did not complete within"),
                             HasSubstr("ncclCommAbort"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  const CollectiveInfo after = info("barrier");
  EXPECT_THAT(backend_->barrier({.timeout = {}}, after).status(),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr(after.describe()), HasSubstr("is broken because"),
                             HasSubstr(absl::StrCat(late.describe(), " timed out")))));
  ASSERT_CUDA(cudaStreamSynchronize(caller_stream_));
}

TEST_F(NcclBackendTest, AbortFailsOutstandingCallsAndLaterOnes) {
  DeviceTensor data(DType::kFloat32, {16});
  blockStream(caller_stream_, 1000);
  CudaStreamGuard guard(caller_stream_);
  const Backend::WorkOr work =
      backend_->allReduce(data.tensor(), {.op = ReduceOp::kSum, .timeout = {}}, info("all_reduce"));
  ASSERT_TRUE(work.ok()) << work.status();
  backend_->abort();
  EXPECT_THAT((*work)->wait(absl::Seconds(10)),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("abort() was called")));
  EXPECT_THAT(backend_->barrier({.timeout = {}}, info("barrier")).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("is broken because abort()")));
  ASSERT_CUDA(cudaStreamSynchronize(caller_stream_));
}

TEST_F(NcclBackendTest, AnUnmatchedSendFailsNamingThePeer) {
  // A send to self without its receive: NCCL refuses it or never finishes
  // it; either way the call fails, and the error names the call and peer.
  DeviceTensor data(DType::kFloat32, {16});
  const CollectiveInfo send = info("send", 0);
  const Backend::WorkOr work =
      backend_->send(data.tensor(), 0, {.tag = 0, .timeout = absl::Seconds(2)}, send);
  const absl::Status status = work.ok() ? (*work)->wait() : work.status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(send.describe()));
  EXPECT_THAT(send.describe(), HasSubstr("peer rank 0"));
}

TEST_F(NcclBackendTest, ArgumentsNcclCannotTakeAreRefusedAtOnce) {
  DeviceTensor data(DType::kFloat32, {16});
  EXPECT_THAT(backend_->send(data.tensor(), 0, {.tag = 3, .timeout = {}}, info("send", 0)).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("backend nccl does not support tags on send/recv")));
  EXPECT_THAT(backend_->recvAnySource(data.tensor(), {}, info("recv_any_source")).status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       AllOf(HasSubstr("backend nccl does not support recv_any_source"),
                             HasSubstr("receive from a named rank"))));
  std::vector<float> host(16);
  EXPECT_THAT(
      backend_
          ->allReduce(Tensor::of(host), {.op = ReduceOp::kSum, .timeout = {}}, info("all_reduce"))
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("runs on cuda:0"), HasSubstr("f32[16] on cpu"))));
}

TEST_F(NcclBackendTest, AGroupWithTheSameMembersGetsItsOwnWorkingCommunicator) {
  // Split from the first group's communicator (same members).
  absl::StatusOr<std::unique_ptr<Backend>> again = createNcclBackend(contextFor("again"));
  ASSERT_TRUE(again.ok()) << again.status();
  DeviceTensor data(DType::kInt32, {8});
  const std::vector<uint8_t> bytes = pattern(DType::kInt32, 8, 2);
  data.upload(bytes);
  ASSERT_TRUE(run((*again)->allReduce(data.tensor(), {.op = ReduceOp::kSum, .timeout = {}},
                                      {.group = "again",
                                       .rank = 0,
                                       .group_size = 1,
                                       .seq = 1,
                                       .op = "all_reduce",
                                       .peer = -1}))
                  .ok());
  EXPECT_EQ(data.download(), bytes);
}

}  // namespace
}  // namespace loom::comm::nccl
