// Tests of the object collectives on gloo with ranks as threads: strings of
// different lengths (empty ones among them), trivially copyable structs and
// a type with its own serializer, every root, and failures: an object that
// does not serialize is reported with the same words on every rank that
// receives it, and one that does not deserialize names the rank it came
// from. Also which device the bytes travel through, and that CUDA staging
// fails with its reason where no GPU is usable.
#include "comm/object_collectives.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "comm/nccl/cuda_util.h"
#include "comm/process_group.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

// A user type with its own serializer: "name:count". An empty name does not
// serialize and "bad" does not deserialize, so that tests can fail either.
struct Record {
  std::string name;
  int count = 0;
  bool operator==(const Record&) const = default;
};

template <>
struct loom::comm::ObjectSerializer<Record> {
  static absl::StatusOr<std::string> serialize(const Record& record) {
    if (record.name.empty()) return absl::InvalidArgumentError("a record needs a name");
    return absl::StrCat(record.name, ":", record.count);
  }
  static absl::StatusOr<Record> deserialize(std::string_view bytes) {
    const std::vector<std::string> parts = absl::StrSplit(std::string(bytes), ':');
    Record record;
    if (parts.size() != 2 || parts[0] == "bad" || !absl::SimpleAtoi(parts[1], &record.count)) {
      return absl::InvalidArgumentError(absl::StrCat("'", std::string(bytes), "' is no record"));
    }
    record.name = parts[0];
    return record;
  }
};

namespace loom::comm {
namespace {

using ::loom::comm::testing::runRanks;
using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Point {
  int32_t x;
  double y;
  bool operator==(const Point&) const = default;
};

ProcessGroupOptions quickOptions() {
  ProcessGroupOptions options;
  options.timeout = absl::Seconds(20);
  return options;
}

// Rank r's string: r copies of a letter, so rank 0's is empty.
std::string textOf(int rank) { return std::string(rank, static_cast<char>('a' + rank)); }

class ObjectCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(ObjectCollectivesTest, BroadcastFromEveryRoot) {
  runRanks(
      GetParam(),
      [&](ProcessGroup& group) {
        for (int src = 0; src < group.size(); ++src) {
          std::vector<std::string> objects(3);
          if (group.rank() == src) objects = {"", textOf(src + 1), std::string(1000, 'z')};
          ASSERT_TRUE(broadcastObjectList(group, objects, src).ok());
          EXPECT_THAT(objects, ElementsAre("", textOf(src + 1), std::string(1000, 'z')));
        }
        std::vector<Point> points(2);
        if (group.rank() == 1) points = {{1, 0.5}, {-7, 1e300}};
        ASSERT_TRUE(broadcastObjectList(group, points, 1).ok());
        EXPECT_THAT(points, ElementsAre(Point{1, 0.5}, Point{-7, 1e300}));
        std::vector<int> none;
        EXPECT_TRUE(broadcastObjectList(group, none, 0).ok());
      },
      quickOptions());
}

TEST_P(ObjectCollectivesTest, AllGatherAndGatherObjectsOfDifferentSizes) {
  runRanks(
      GetParam(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        std::vector<std::string> want;
        for (int r = 0; r < n; ++r) want.push_back(textOf(r));
        std::vector<std::string> all;
        ASSERT_TRUE(allGatherObject(group, all, textOf(group.rank())).ok());
        EXPECT_EQ(all, want);
        std::vector<Record> records;
        ASSERT_TRUE(allGatherObject(group, records, Record{textOf(group.rank() + 1), 3}).ok());
        ASSERT_EQ(records.size(), static_cast<size_t>(n));
        EXPECT_EQ(records[n - 1], (Record{textOf(n), 3}));
        for (int dst = 0; dst < n; ++dst) {
          std::vector<std::string> gathered = {"untouched"};
          ASSERT_TRUE(gatherObject(group, textOf(group.rank()), gathered, dst).ok());
          if (group.rank() == dst) {
            EXPECT_EQ(gathered, want);
          } else {
            EXPECT_THAT(gathered, ElementsAre("untouched"));
          }
        }
      },
      quickOptions());
}

TEST_P(ObjectCollectivesTest, ScatterFromEveryRootAndSendReceiveLists) {
  runRanks(
      GetParam(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        for (int src = 0; src < n; ++src) {
          std::vector<std::string> inputs;
          if (group.rank() == src) {
            for (int r = 0; r < n; ++r) inputs.push_back(absl::StrCat(textOf(r), "/", src));
          }
          std::string mine;
          ASSERT_TRUE(scatterObjectList(group, mine, inputs, src).ok());
          EXPECT_EQ(mine, absl::StrCat(textOf(group.rank()), "/", src));
        }
        Point point{};
        std::vector<Point> points;
        if (group.rank() == 0) {
          for (int r = 0; r < n; ++r) points.push_back({r, r / 2.0});
        }
        ASSERT_TRUE(scatterObjectList(group, point, points, 0).ok());
        EXPECT_EQ(point, (Point{group.rank(), group.rank() / 2.0}));

        // Around the ring: even ranks send first.
        const int next = (group.rank() + 1) % n;
        const int prev = (group.rank() + n - 1) % n;
        const std::vector<Record> out = {{"from", group.rank()}, {textOf(group.rank() + 1), 9}};
        std::vector<Record> in(2);
        if (group.rank() % 2 == 0) {
          ASSERT_TRUE(sendObjectList(group, out, next).ok());
          ASSERT_TRUE(recvObjectList(group, in, prev).ok());
        } else {
          ASSERT_TRUE(recvObjectList(group, in, prev).ok());
          ASSERT_TRUE(sendObjectList(group, out, next).ok());
        }
        EXPECT_THAT(in, ElementsAre(Record{"from", prev}, Record{textOf(prev + 1), 9}));
      },
      quickOptions());
}

INSTANTIATE_TEST_SUITE_P(Ranks, ObjectCollectivesTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "ranks");
                         });

TEST(ObjectCollectivesFailureTest, AnObjectThatDoesNotSerializeIsNamedOnEveryRank) {
  runRanks(
      3,
      [&](ProcessGroup& group) {
        const std::string prefix = [&] {
          return absl::StrCat(" in group default (rank ", group.rank(), " of 3): ");
        }();
        // Rank 1's record has no name.
        std::vector<Record> all;
        const Record mine{group.rank() == 1 ? "" : "ok", 1};
        EXPECT_THAT(allGatherObject(group, all, mine),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr(absl::StrCat("all_gather_object", prefix)),
                                   HasSubstr("rank 1's object failed to serialize: a record "
                                             "needs a name"))));
        std::vector<Record> gathered;
        EXPECT_THAT(gatherObject(group, mine, gathered, 2),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("gather_object in group default (rank " +
                                       std::to_string(group.rank()) +
                                       " of 3): rank 1's object failed to serialize")));
        std::vector<Record> list = {{"fine", 1}, {"", 2}};
        if (group.rank() != 0) list = std::vector<Record>(2);
        EXPECT_THAT(broadcastObjectList(group, list, 0),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr(absl::StrCat("broadcast_object_list", prefix)),
                                   HasSubstr("object 1 of rank 0 failed to serialize: a record "
                                             "needs a name"))));
        Record piece;
        std::vector<Record> inputs;
        if (group.rank() == 2) inputs = {{"a", 0}, {"b", 1}, {"", 2}};
        EXPECT_THAT(scatterObjectList(group, piece, inputs, 2),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr(absl::StrCat("scatter_object_list", prefix)),
                                   HasSubstr("object 2 of rank 2 failed to serialize"))));
        if (group.rank() == 2) inputs = {{"a", 0}};
        EXPECT_THAT(scatterObjectList(group, piece, inputs, 2),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("rank 2 passed 1 input objects for 3 ranks")));
        if (group.rank() == 0) {
          EXPECT_THAT(sendObjectList(group, std::vector<Record>{{"x", 1}, {"", 0}}, 1),
                      StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("send_object_list in group default (rank 0 of 3): "
                                         "object 1 of rank 0 failed to serialize")));
        } else if (group.rank() == 1) {
          std::vector<Record> received(2);
          EXPECT_THAT(recvObjectList(group, received, 0),
                      StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("recv_object_list in group default (rank 1 of 3): "
                                         "object 1 of rank 0 failed to serialize: a record needs "
                                         "a name")));
        }
        // The group is still in step after all of them.
        std::vector<int> ranks;
        ASSERT_TRUE(allGatherObject(group, ranks, group.rank()).ok());
        EXPECT_THAT(ranks, ElementsAre(0, 1, 2));
      },
      quickOptions());
}

TEST(ObjectCollectivesFailureTest, AnObjectThatDoesNotDeserializeNamesItsSender) {
  runRanks(
      2,
      [&](ProcessGroup& group) {
        std::vector<Record> all;
        const absl::Status status =
            allGatherObject(group, all, Record{group.rank() == 1 ? "bad" : "good", 0});
        EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("all_gather_object in group default (rank " +
                                               std::to_string(group.rank()) +
                                               " of 2): object 1 from rank 1 failed to "
                                               "deserialize: 'bad:0' is no record")));
        EXPECT_THAT(broadcastObjectList(group, all, 5),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             HasSubstr("src is 5 but the group has ranks 0 to 1")));
      },
      quickOptions());
}

ProcessGroupOptions ncclOnly() {
  ProcessGroupOptions options = quickOptions();
  options.cpu_backend = "";
  options.cuda_backend = "nccl";
  return options;
}

// As torch.distributed: a group whose backend is NCCL moves the bytes to
// the current CUDA device; any group with a CPU backend uses the CPU. (A
// group's CUDA backend is made at its first CUDA call, so these groups need
// no GPU.)
TEST(ObjectDeviceTest, CudaOnlyWhereTheGroupsOnlyBackendIsNccl) {
  runRanks(
      1, [](ProcessGroup& group) { EXPECT_EQ(objectDevice(group), Device::Type::kCpu); },
      quickOptions());
  runRanks(
      1, [](ProcessGroup& group) { EXPECT_EQ(objectDevice(group), Device::Type::kCuda); },
      ncclOnly());
  ProcessGroupOptions gloo_only = quickOptions();
  gloo_only.cuda_backend = "";
  runRanks(
      1, [](ProcessGroup& group) { EXPECT_EQ(objectDevice(group), Device::Type::kCpu); },
      gloo_only);
}

// Where no GPU is usable, an NCCL group's object collectives fail at once
// with the reason and the way out, and so does asking for CUDA on a group
// with a CPU backend. object_collectives_cuda_test covers a GPU.
TEST(ObjectCollectivesWithoutAGpuTest, CudaStagingFailsWithTheReason) {
  if (nccl::cudaUnavailableReason().empty()) {
    GTEST_SKIP() << "a GPU is usable here; object_collectives_cuda_test covers staging";
  }
  const auto staging_failed = [](const std::string& op) {
    return StatusIs(absl::StatusCode::kFailedPrecondition,
                    AllOf(HasSubstr(op + " in group default (rank 0 of 1): the objects travel "
                                         "through the current CUDA device"),
                          HasSubstr("no usable GPU"), HasSubstr("Device::Type::kCpu")));
  };
  runRanks(
      1,
      [&](ProcessGroup& group) {
        std::vector<std::string> objects = {"a"};
        EXPECT_THAT(broadcastObjectList(group, objects, 0),
                    staging_failed("broadcast_object_list"));
        std::vector<std::string> all;
        EXPECT_THAT(allGatherObject(group, all, std::string("b")),
                    staging_failed("all_gather_object"));
        // The CPU on a group without a CPU backend is the front end's refusal.
        EXPECT_THAT(allGatherObject(group, all, std::string("b"),
                                    {.timeout = std::nullopt, .device = Device::Type::kCpu}),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no CPU backend")));
      },
      ncclOnly());
  runRanks(
      1,
      [&](ProcessGroup& group) {
        std::string mine;
        EXPECT_THAT(scatterObjectList(group, mine, std::vector<std::string>{"c"}, 0,
                                      {.timeout = std::nullopt, .device = Device::Type::kCuda}),
                    staging_failed("scatter_object_list"));
        // The default on this group stays the CPU.
        ASSERT_TRUE(scatterObjectList(group, mine, std::vector<std::string>{"c"}, 0).ok());
        EXPECT_EQ(mine, "c");
      },
      quickOptions());
}

}  // namespace
}  // namespace loom::comm
