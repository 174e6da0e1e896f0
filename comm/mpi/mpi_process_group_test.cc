// The calls built on the ProcessGroup front end (synchronous forms, the
// object collectives, the uneven all_gather, Join, receives from any
// source) over the mpi backend, as
// N real processes under mpirun (run_under_mpirun.sh, 2 and 3 ranks). Every
// rank runs every test in the same order.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/all_backends.h"
#include "comm/file_store.h"
#include "comm/join.h"
#include "comm/object_collectives.h"
#include "comm/process_group.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(20);

int envInt(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    ADD_FAILURE() << name << " is not set; run this test under mpirun (run_under_mpirun.sh)";
    return 0;
  }
  return std::atoi(value);
}

class MpiProcessGroupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* dir = std::getenv("TEST_TMPDIR");
    absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::open(
        absl::StrCat(dir ? dir : "/tmp", "/mpi_process_group_test_store"), kTimeout);
    ASSERT_TRUE(store.ok()) << store.status();
    ProcessGroupOptions options;
    options.cpu_backend = "mpi";
    options.cuda_backend = "";
    options.timeout = kTimeout;
    options.checks = CollectiveChecks::kOff;
    absl::StatusOr<std::shared_ptr<ProcessGroup>> world = ProcessGroup::create(
        std::shared_ptr<Store>(*std::move(store)), envInt("OMPI_COMM_WORLD_RANK"),
        envInt("OMPI_COMM_WORLD_SIZE"), options);
    ASSERT_TRUE(world.ok()) << world.status();
    world_ = new std::shared_ptr<ProcessGroup>(*std::move(world));
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(world_, nullptr); }
  ProcessGroup& world() { return **world_; }

  static inline std::shared_ptr<ProcessGroup>* world_ = nullptr;
};

TEST_F(MpiProcessGroupTest, SynchronousFormsReturnWithTheResult) {
  std::vector<int64_t> value = {world().rank() + 1};
  ASSERT_TRUE(world().allReduceSync(Tensor::of(value)).ok());
  const int64_t n = world().size();
  EXPECT_EQ(value[0], n * (n + 1) / 2);
  value = {world().rank() == 1 ? 42 : 0};
  ASSERT_TRUE(world().broadcastSync(Tensor::of(value), {.root = 1}).ok());
  EXPECT_EQ(value[0], 42);
}

TEST_F(MpiProcessGroupTest, ObjectCollectives) {
  const int rank = world().rank();
  const int n = world().size();
  std::vector<std::string> objects(2);
  if (rank == n - 1) objects = {"", std::string(300, 'q')};
  ASSERT_TRUE(broadcastObjectList(world(), objects, n - 1).ok());
  EXPECT_THAT(objects, ElementsAre("", std::string(300, 'q')));

  std::vector<std::string> all;
  ASSERT_TRUE(allGatherObject(world(), all, std::string(rank, 'a' + rank)).ok());
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], std::string(r, 'a' + r));

  std::vector<double> gathered;
  ASSERT_TRUE(gatherObject(world(), rank * 0.5, gathered, 0).ok());
  if (rank == 0) {
    ASSERT_EQ(gathered.size(), static_cast<size_t>(n));
    EXPECT_EQ(gathered[n - 1], (n - 1) * 0.5);
  }

  std::vector<std::string> inputs;
  if (rank == 0) {
    for (int r = 0; r < n; ++r) inputs.push_back(absl::StrCat("for ", r));
  }
  std::string mine;
  ASSERT_TRUE(scatterObjectList(world(), mine, inputs, 0).ok());
  EXPECT_EQ(mine, absl::StrCat("for ", rank));

  if (rank == 0) {
    ASSERT_TRUE(sendObjectList(world(), std::vector<std::string>{"x", "yz"}, 1).ok());
  } else if (rank == 1) {
    std::vector<std::string> received(2);
    ASSERT_TRUE(recvObjectList(world(), received, 0).ok());
    EXPECT_THAT(received, ElementsAre("x", "yz"));
  }
}

TEST_F(MpiProcessGroupTest, UnevenAllGather) {
  const int rank = world().rank();
  const std::vector<int32_t> input(rank + 1, rank);
  std::vector<std::vector<int32_t>> outputs(world().size());
  std::vector<Tensor> views;
  for (int r = 0; r < world().size(); ++r) {
    outputs[r].assign(r + 1, -1);
    views.push_back(Tensor::of(outputs[r]));
  }
  ASSERT_TRUE(world().allGatherSync(views, Tensor::of(input)).ok());
  for (int r = 0; r < world().size(); ++r) {
    EXPECT_EQ(outputs[r], std::vector<int32_t>(r + 1, r)) << r;
  }
}

// MPI_ANY_SOURCE: rank 0 takes the messages in whatever order they come
// and learns each sender, as on gloo.
TEST_F(MpiProcessGroupTest, ReceivesFromAnySourceNameTheSender) {
  const int rank = world().rank();
  const int n = world().size();
  if (rank == 0) {
    std::vector<int> senders;
    for (int i = 1; i < n; ++i) {
      std::vector<int64_t> got(2, -1);
      absl::StatusOr<int> sender = world().recvAnySourceSync(Tensor::of(got), {.tag = 3});
      ASSERT_TRUE(sender.ok()) << sender.status();
      EXPECT_EQ(got, (std::vector<int64_t>{*sender * 10, *sender * 10 + 1}));
      senders.push_back(*sender);
    }
    std::sort(senders.begin(), senders.end());
    std::vector<int> expected;
    for (int r = 1; r < n; ++r) expected.push_back(r);
    EXPECT_EQ(senders, expected);
  } else {
    std::vector<int64_t> mine = {rank * 10, rank * 10 + 1};
    ASSERT_TRUE(world().sendSync(Tensor::of(mine), 0, {.tag = 3}).ok());
  }
}

// The asynchronous form, tags telling two senders apart, and a receive
// from a named peer reporting that peer too.
TEST_F(MpiProcessGroupTest, AnySourceReceivesMatchTagsAndReportTheirSender) {
  const int rank = world().rank();
  const int last = world().size() - 1;
  if (rank == 0) {
    std::vector<float> from_last(3), from_one(1);
    absl::StatusOr<std::shared_ptr<Work>> tagged =
        world().recvAnySource(Tensor::of(from_last), {.tag = 8});
    ASSERT_TRUE(tagged.ok()) << tagged.status();
    EXPECT_EQ((*tagged)->info().op, "recv_any_source");
    absl::StatusOr<std::shared_ptr<Work>> named = world().recv(Tensor::of(from_one), 1, {.tag = 7});
    ASSERT_TRUE(named.ok()) << named.status();
    ASSERT_TRUE((*tagged)->wait().ok());
    ASSERT_TRUE((*named)->wait().ok());
    const absl::StatusOr<int> tagged_sender = (*tagged)->sourceRank();
    const absl::StatusOr<int> named_sender = (*named)->sourceRank();
    ASSERT_TRUE(tagged_sender.ok()) << tagged_sender.status();
    ASSERT_TRUE(named_sender.ok()) << named_sender.status();
    EXPECT_EQ(*tagged_sender, last);
    EXPECT_EQ(from_last, (std::vector<float>{0.5f, 1.5f, 2.5f}));
    EXPECT_EQ(*named_sender, 1);
    EXPECT_EQ(from_one, std::vector<float>{7});
  } else {
    if (rank == 1) {
      std::vector<float> seven = {7};
      ASSERT_TRUE(world().sendSync(Tensor::of(seven), 0, {.tag = 7}).ok());
    }
    if (rank == last) {
      std::vector<float> three = {0.5f, 1.5f, 2.5f};
      ASSERT_TRUE(world().sendSync(Tensor::of(three), 0, {.tag = 8}).ok());
    }
  }
}

// A message shorter than the receive names its sender; the group goes on.
TEST_F(MpiProcessGroupTest, AShortMessageFromAnySourceNamesItsSender) {
  const int rank = world().rank();
  if (rank == 0) {
    std::vector<int32_t> got(4);
    EXPECT_THAT(world().recvAnySourceSync(Tensor::of(got), {.tag = 9}).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("recv_any_source #"), HasSubstr("in group default"),
                               HasSubstr("received 2 elements from rank 1 but expected 4"))));
  } else if (rank == 1) {
    std::vector<int32_t> two = {1, 2};
    ASSERT_TRUE(world().sendSync(Tensor::of(two), 0, {.tag = 9}).ok());
  }
  std::vector<int64_t> one = {1};
  ASSERT_TRUE(world().allReduceSync(Tensor::of(one)).ok());
  EXPECT_EQ(one[0], world().size());
}

// One all-reduce per step; rank r has r + 1 steps; joined ranks shadow.
class Summer : public Joinable {
 public:
  explicit Summer(ProcessGroup& group) : group_(group) {}
  absl::Status step(int64_t value, std::vector<int64_t>& sums) {
    std::vector<int64_t> buffer = {value};
    if (absl::Status s = group_.allReduceSync(Tensor::of(buffer)); !s.ok()) return s;
    sums.push_back(buffer[0]);
    return absl::OkStatus();
  }
  std::unique_ptr<JoinHook> joinHook() override { return std::make_unique<Zero>(group_); }
  ProcessGroup& joinProcessGroup() override { return group_; }

 private:
  class Zero : public JoinHook {
   public:
    explicit Zero(ProcessGroup& group) : group_(group) {}
    absl::Status mainHook() override {
      std::vector<int64_t> zero = {0};
      return group_.allReduceSync(Tensor::of(zero));
    }

   private:
    ProcessGroup& group_;
  };
  ProcessGroup& group_;
};

TEST_F(MpiProcessGroupTest, JoinWithUnevenSteps) {
  const int rank = world().rank();
  const int n = world().size();
  Summer summer(world());
  Join join({&summer});
  std::vector<int64_t> sums;
  for (int s = 0; s <= rank; ++s) {
    ASSERT_TRUE(join.notify().ok());
    ASSERT_TRUE(summer.step(1, sums).ok());
  }
  ASSERT_TRUE(join.join().ok());
  // Step s counts the ranks with more than s steps: n - s.
  for (int s = 0; s <= rank; ++s) EXPECT_EQ(sums[s], n - s) << "step " << s;
}

}  // namespace
}  // namespace loom::comm
