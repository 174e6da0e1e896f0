// Tests of initProcessGroup: backend strings, PyTorch's default timeouts,
// the rendezvous inside it (ranks as threads over file:// and a shared
// store), backends known by linking alone, and option errors that every rank
// reports with the same words before any network traffic.
#include "comm/init_process_group.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "comm/hash_store.h"
#include "comm/process_group.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

void expectChoice(std::string_view spec, std::string_view cpu, std::string_view cuda) {
  absl::StatusOr<BackendChoice> choice = parseBackendSpec(spec);
  ASSERT_TRUE(choice.ok()) << spec << ": " << choice.status();
  EXPECT_EQ(choice->cpu, cpu) << spec;
  EXPECT_EQ(choice->cuda, cuda) << spec;
}

TEST(BackendSpecTest, NamesAndPerDeviceListsAsPyTorch) {
  expectChoice("", "gloo", "nccl");
  expectChoice("gloo", "gloo", "");
  expectChoice("NCCL", "", "nccl");
  expectChoice("mpi", "mpi", "mpi");
  expectChoice("cpu:gloo,cuda:mpi", "gloo", "mpi");
  expectChoice("cuda:nccl", "", "nccl");
}

TEST(BackendSpecTest, BadSpecsSayWhatIsWrong) {
  // No registration call anywhere in this test: linking //comm:all_backends
  // is what makes the three names known.
  EXPECT_THAT(parseBackendSpec("glooo").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unknown backend 'glooo'"),
                             HasSubstr("registered backends are gloo, mpi, nccl"))));
  EXPECT_THAT(parseBackendSpec("cpu:nccl").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("backend nccl does not serve cpu tensors")));
  EXPECT_THAT(parseBackendSpec("gpu:nccl").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown device type 'gpu'")));
  EXPECT_THAT(parseBackendSpec("cpu:gloo,cpu:mpi").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu is given twice")));
  EXPECT_THAT(parseBackendSpec("cpu:gloo,cuda").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not device:backend")));
}

TEST(DefaultTimeoutTest, TenMinutesForNcclThirtyForTheRest) {
  EXPECT_EQ(defaultTimeout("nccl"), absl::Minutes(10));
  EXPECT_EQ(defaultTimeout("NCCL"), absl::Minutes(10));
  EXPECT_EQ(defaultTimeout("gloo"), absl::Minutes(30));
  EXPECT_EQ(defaultTimeout("mpi"), absl::Minutes(30));
  EXPECT_EQ(defaultTimeout(""), absl::Minutes(30));
  EXPECT_EQ(defaultTimeout("cpu:gloo,cuda:nccl"), absl::Minutes(30));
}

// Runs `body(rank)` on `size` threads and joins them.
void onThreads(int size, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) threads.emplace_back(body, rank);
  for (std::thread& thread : threads) thread.join();
}

TEST(InitProcessGroupTest, OneCallFromAFileInitMethodToAWorkingGroup) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/init_file");
  constexpr int kSize = 3;
  onThreads(kSize, [&](int rank) {
    InitOptions options;
    options.backend = "gloo";
    options.init_method = absl::StrCat("file://", path, "?world_size=", kSize);
    options.rank = rank;
    absl::StatusOr<std::shared_ptr<ProcessGroup>> group = initProcessGroup(options);
    ASSERT_TRUE(group.ok()) << group.status();
    EXPECT_EQ((*group)->rank(), rank);
    EXPECT_EQ((*group)->size(), kSize);
    EXPECT_EQ((*group)->name(), "default");
    EXPECT_EQ((*group)->timeout(), absl::Minutes(30));
    std::vector<int64_t> value = {rank + 1};
    ASSERT_TRUE((*group)->allReduceSync(Tensor::of(value)).ok());
    EXPECT_EQ(value[0], 6);
  });
}

TEST(InitProcessGroupTest, AStoreAndTimeoutGivenByTheCaller) {
  auto store = std::make_shared<HashStore>(absl::Seconds(20));
  onThreads(2, [&](int rank) {
    InitOptions options;
    options.backend = "gloo";
    options.store = store;
    options.rank = rank;
    options.world_size = 2;
    options.timeout = absl::Seconds(20);
    options.group_name = "given";
    absl::StatusOr<std::shared_ptr<ProcessGroup>> group = initProcessGroup(options);
    ASSERT_TRUE(group.ok()) << group.status();
    EXPECT_EQ((*group)->timeout(), absl::Seconds(20));
    EXPECT_EQ((*group)->name(), "given");
    std::vector<float> value = {rank == 0 ? 2.5f : 4.0f};
    ASSERT_TRUE((*group)->allReduceSync(Tensor::of(value), {.op = ReduceOp::kProduct}).ok());
    EXPECT_EQ(value[0], 10.0f);
    // A gloo group has no CUDA backend; the call says so.
    std::vector<float> device_memory(1);
    const Tensor on_gpu(device_memory.data(), DType::kFloat32, {1}, Device::cuda(0));
    EXPECT_THAT((*group)->allReduceSync(on_gpu),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no CUDA backend")));
  });
}

TEST(InitProcessGroupTest, AMistypedBackendFailsTheSameWayOnEveryRank) {
  constexpr int kSize = 3;
  std::vector<std::string> messages(kSize);
  onThreads(kSize, [&](int rank) {
    InitOptions options;
    options.backend = "glo";
    options.getenv = [rank](const std::string& name) -> std::optional<std::string> {
      if (name == "MASTER_ADDR") return "127.0.0.1";
      if (name == "MASTER_PORT") return "1";  // never reached: the backend fails first
      if (name == "RANK") return absl::StrCat(rank);
      if (name == "WORLD_SIZE") return absl::StrCat(kSize);
      return std::nullopt;
    };
    absl::StatusOr<std::shared_ptr<ProcessGroup>> group = initProcessGroup(options);
    ASSERT_FALSE(group.ok());
    EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument);
    messages[rank] = std::string(group.status().message());
  });
  EXPECT_THAT(messages[0], AllOf(HasSubstr("init_process_group: unknown backend 'glo'"),
                                 HasSubstr("registered backends are gloo, mpi, nccl")));
  EXPECT_EQ(messages[1], messages[0]);
  EXPECT_EQ(messages[2], messages[0]);
}

TEST(InitProcessGroupTest, ProcessGroupCreateAlsoChecksNamesBeforeTheStore) {
  // Over a store no rank ever writes to: the name is refused at once on
  // every rank, each naming itself only in the prefix.
  auto store = std::make_shared<HashStore>(absl::Seconds(20));
  std::vector<std::string> messages(2);
  onThreads(2, [&](int rank) {
    ProcessGroupOptions options;
    options.cpu_backend = "Gloo ";
    absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
        ProcessGroup::create(store, rank, 2, options);
    ASSERT_FALSE(group.ok());
    messages[rank] = std::string(group.status().message());
  });
  EXPECT_THAT(messages[0], HasSubstr("creating group default (rank 0 of 2): unknown backend"));
  EXPECT_THAT(messages[1], HasSubstr("creating group default (rank 1 of 2): unknown backend"));
  EXPECT_EQ(messages[0].substr(messages[0].find("unknown")),
            messages[1].substr(messages[1].find("unknown")));
  EXPECT_EQ(*store->numKeys(), 0);
}

TEST(InitProcessGroupTest, OptionErrors) {
  InitOptions options;
  options.store = std::make_shared<HashStore>(absl::Seconds(1));
  EXPECT_THAT(initProcessGroup(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs rank and world_size")));
  options.timeout = absl::ZeroDuration();
  EXPECT_THAT(initProcessGroup(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("timeout must be positive")));
  InitOptions no_scheme;
  no_scheme.init_method = "localhost:29500";
  EXPECT_THAT(initProcessGroup(no_scheme).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no scheme")));
}

}  // namespace
}  // namespace loom::comm
