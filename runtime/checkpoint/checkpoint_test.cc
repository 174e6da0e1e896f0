// Tests of sharded checkpoints: round trips, ranks as threads over one
// HashStore, resharding on load, the crash guarantees (a rank that never
// finishes, a rank killed by SIGKILL mid-write) and every load error.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/file_store.h"
#include "comm/hash_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/checkpoint/checkpoint_writer.h"
#include "runtime/checkpoint/shard_file.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime::checkpoint {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr float kPadding = -999.0f;

std::string freshDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/ckpt_", info->test_suite_name(), "_", info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Element (i, j) of the [rows, cols] test tensor, distinct per element and
// per `salt` (so two steps' checkpoints differ).
float valueAt(int64_t i, int64_t j, int64_t cols, float salt) {
  return static_cast<float>(i * cols + j) + salt;
}

std::vector<float> wholeTensor(int64_t rows, int64_t cols, float salt) {
  std::vector<float> values;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) values.push_back(valueAt(i, j, cols, salt));
  }
  return values;
}

// A rank's padded buffer for `shard`: the box's values, kPadding past it.
std::vector<float> paddedBuffer(const PaddedShard& shard, int64_t cols, float salt) {
  const int64_t local_rows = shard.local_shape[0];
  const int64_t local_cols = shard.local_shape[1];
  std::vector<float> buffer(local_rows * local_cols, kPadding);
  for (int64_t i = 0; i < shard.box.sizes[0]; ++i) {
    for (int64_t j = 0; j < shard.box.sizes[1]; ++j) {
      buffer[i * local_cols + j] =
          valueAt(shard.box.offsets[0] + i, shard.box.offsets[1] + j, cols, salt);
    }
  }
  return buffer;
}

// Saves a [rows, cols] tensor "w" split over `world` ranks along dim 0 by
// running every rank but `absent` as a thread; returns each rank's status.
std::vector<absl::Status> saveRowShards(int64_t step, int64_t rows, int64_t cols, int64_t world,
                                        float salt, comm::Store& store,
                                        std::vector<CheckpointWriter>& writers,
                                        absl::Duration timeout, int64_t absent = -1) {
  std::vector<absl::Status> statuses(world);
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < world; ++r) {
    if (r == absent) continue;
    threads.emplace_back([&, r] {
      const std::vector<int64_t> shape = {rows, cols};
      const DimSplit split{0, world, r};
      absl::StatusOr<PaddedShard> shard = padShard(shape, {&split, 1});
      if (!shard.ok()) {
        statuses[r] = shard.status();
        return;
      }
      const std::vector<float> buffer = paddedBuffer(*shard, cols, salt);
      const ShardView view{"w", DType::kF32, shape, shard->box, shard->local_shape, buffer.data()};
      statuses[r] = writers[r].save(step, {view}, {{"data_step", step}}, store, r, world, timeout);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

int64_t latestOrMinusOne(const std::string& dir) {
  absl::StatusOr<int64_t> step = latestStep(dir);
  return step.ok() ? *step : -1;
}

std::vector<CheckpointWriter> makeWriters(const std::string& dir, int64_t world) {
  return std::vector<CheckpointWriter>(
      world, CheckpointWriter(dir, WriterOptions{.mesh = "fsdp=4", .progress = nullptr}));
}

TEST(CheckpointTest, SingleRankRoundTrip) {
  const std::string dir = freshDir();
  comm::HashStore store;
  const std::vector<float> weights = wholeTensor(4, 3, 0.5f);
  const std::vector<int32_t> counts = {7, -3};
  const std::vector<ShardView> shards = {
      {"layer.w", DType::kF32, {4, 3}, Box{{0, 0}, {4, 3}}, {}, weights.data()},
      {"counts", DType::kI32, {2}, Box{{0}, {2}}, {}, counts.data()}};
  const nlohmann::json metadata = {{"optimizer_step", 12}, {"rng", {{"seed", 42}}}};
  CheckpointWriter writer(dir, WriterOptions{.mesh = "single", .progress = nullptr});
  ASSERT_TRUE(writer.save(12, shards, metadata, store, 0, 1, absl::Seconds(5)).ok());

  EXPECT_EQ(latestOrMinusOne(dir), 12);
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->step(), 12);
  EXPECT_EQ(reader->worldSize(), 1);
  EXPECT_EQ(reader->mesh(), "single");
  EXPECT_EQ(reader->metadata(), metadata);
  EXPECT_THAT(reader->tensorNames(), ElementsAreArray({"counts", "layer.w"}));
  std::vector<float> loaded(12);
  ASSERT_TRUE(reader->readInto("layer.w", Box{{0, 0}, {4, 3}}, loaded.data()).ok());
  EXPECT_EQ(loaded, weights);
  std::vector<int32_t> loaded_counts(2);
  ASSERT_TRUE(reader->readInto("counts", Box{{0}, {2}}, loaded_counts.data()).ok());
  EXPECT_EQ(loaded_counts, counts);
  EXPECT_FALSE(std::filesystem::exists(dir + "/step_12/rank_0.bin.tmp"));
}

TEST(CheckpointTest, RanksAsThreadsSaveUnevenRowsAndReshardOnLoad) {
  const std::string dir = freshDir();
  comm::HashStore store;
  std::vector<CheckpointWriter> writers = makeWriters(dir, 4);
  for (const absl::Status& s :
       saveRowShards(3, 10, 6, 4, 0.25f, store, writers, absl::Seconds(5))) {
    ASSERT_TRUE(s.ok()) << s;
  }
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->metadata()["data_step"], 3);
  EXPECT_EQ(reader->worldSize(), 4);

  std::vector<float> whole(60);
  ASSERT_TRUE(reader->readInto("w", Box{{0, 0}, {10, 6}}, whole.data()).ok());
  EXPECT_EQ(whole, wholeTensor(10, 6, 0.25f));

  // The 2x2 fsdp x tp layout: rows 5/5 and columns 3/3, each box assembled
  // from the 3,3,3,1 row shards it crosses.
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      const std::vector<DimSplit> splits = {{0, 2, i}, {1, 2, j}};
      absl::StatusOr<PaddedShard> shard = padShard(std::vector<int64_t>{10, 6}, splits);
      ASSERT_TRUE(shard.ok());
      std::vector<float> box(15);
      ASSERT_TRUE(reader->readInto("w", shard->box, box.data()).ok());
      std::vector<float> expected;
      for (int64_t r = 0; r < 5; ++r) {
        for (int64_t c = 0; c < 3; ++c) {
          expected.push_back(valueAt(5 * i + r, 3 * j + c, 6, 0.25f));
        }
      }
      EXPECT_EQ(box, expected) << "box " << describeBox(shard->box);
    }
  }
}

TEST(CheckpointTest, PaddingIsNotStored) {
  const std::string dir = freshDir();
  comm::HashStore store;
  // 10 rows over 8 ranks: 2 rows each, ranks 5..7 hold only padding.
  std::vector<CheckpointWriter> writers = makeWriters(dir, 8);
  for (const absl::Status& s : saveRowShards(1, 10, 2, 8, 0.0f, store, writers, absl::Seconds(5))) {
    ASSERT_TRUE(s.ok()) << s;
  }
  const auto manifest = nlohmann::json::parse(std::ifstream(dir + "/step_1/manifest.json"));
  EXPECT_EQ(manifest["tensors"][0]["shards"].size(), 5u);
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> whole(20);
  ASSERT_TRUE(reader->readInto("w", Box{{0, 0}, {10, 2}}, whole.data()).ok());
  EXPECT_EQ(whole, wholeTensor(10, 2, 0.0f));
}

TEST(CheckpointTest, AMissingRankFailsTheSaveAndKeepsThePreviousCheckpoint) {
  const std::string dir = freshDir();
  comm::HashStore store;
  std::vector<CheckpointWriter> writers = makeWriters(dir, 4);
  for (const absl::Status& s : saveRowShards(1, 10, 6, 4, 1.0f, store, writers, absl::Seconds(5))) {
    ASSERT_TRUE(s.ok()) << s;
  }
  // Rank 3 dies after writing part of its temporary file.
  std::filesystem::create_directories(dir + "/step_2");
  std::ofstream(dir + "/step_2/rank_3.bin.tmp") << "LOOMCK";
  const std::vector<absl::Status> statuses =
      saveRowShards(2, 10, 6, 4, 2.0f, store, writers, absl::Milliseconds(300), 3);
  EXPECT_THAT(statuses[0], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                    AllOf(HasSubstr("rank 3 did not finish"),
                                          HasSubstr("'latest' still names step_1"))));
  EXPECT_THAT(statuses[1],
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("rank 0 reports"), HasSubstr("rank 3 did not finish"))));
  EXPECT_FALSE(std::filesystem::exists(dir + "/step_2/manifest.json"));
  EXPECT_EQ(latestOrMinusOne(dir), 1);
  EXPECT_THAT(CheckpointReader::open(dir, 2).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("never committed")));
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> whole(60);
  ASSERT_TRUE(reader->readInto("w", Box{{0, 0}, {10, 6}}, whole.data()).ok());
  EXPECT_EQ(whole, wholeTensor(10, 6, 1.0f));
}

TEST(CheckpointTest, ARankKilledMidWriteLeavesThePreviousCheckpoint) {
  const std::string dir = freshDir();
  {
    comm::HashStore store;
    std::vector<CheckpointWriter> writers = makeWriters(dir, 2);
    for (const absl::Status& s :
         saveRowShards(1, 10, 6, 2, 1.0f, store, writers, absl::Seconds(5))) {
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  // Step 2 across two processes over a FileStore. Rank 1's tensor spans
  // several 1 MiB flushes; after the first one it SIGKILLs itself, so it
  // dies inside the real write path with a partial temporary file.
  const std::string store_path = dir + "/store";
  const std::vector<int64_t> shape = {1024, 1024};
  const std::vector<float> values(512 * 1024, 3.0f);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<comm::FileStore>> store =
        comm::FileStore::open(store_path, absl::Seconds(10));
    if (!store.ok()) ::_exit(2);
    CheckpointWriter writer(
        dir, WriterOptions{.mesh = "", .progress = [](int64_t, int64_t) { ::raise(SIGKILL); }});
    const ShardView view{"big", DType::kF32, shape, Box{{512, 0}, {512, 1024}}, {}, values.data()};
    // Not reached: the first progress report kills this process.
    ::_exit(writer.save(2, {view}, nullptr, **store, 1, 2, absl::Seconds(10)).ok() ? 0 : 3);
  }
  absl::StatusOr<std::unique_ptr<comm::FileStore>> store =
      comm::FileStore::open(store_path, absl::Seconds(10));
  ASSERT_TRUE(store.ok()) << store.status();
  CheckpointWriter writer(dir);
  const ShardView view{"big", DType::kF32, shape, Box{{0, 0}, {512, 1024}}, {}, values.data()};
  EXPECT_THAT(writer.save(2, {view}, nullptr, **store, 0, 2, absl::Seconds(1)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("rank 1 did not finish"),
                             HasSubstr("'latest' still names step_1"))));
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status));
  EXPECT_EQ(WTERMSIG(wait_status), SIGKILL);
  EXPECT_GT(std::filesystem::file_size(dir + "/step_2/rank_1.bin.tmp"), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/step_2/rank_1.bin"));
  EXPECT_EQ(latestOrMinusOne(dir), 1);
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> whole(60);
  ASSERT_TRUE(reader->readInto("w", Box{{0, 0}, {10, 6}}, whole.data()).ok());
  EXPECT_EQ(whole, wholeTensor(10, 6, 1.0f));
}

class LoadErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = freshDir();
    comm::HashStore store;
    std::vector<CheckpointWriter> writers = makeWriters(dir_, 2);
    for (const absl::Status& s :
         saveRowShards(5, 4, 3, 2, 0.0f, store, writers, absl::Seconds(5))) {
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  std::string dir_;
};

TEST_F(LoadErrorsTest, CorruptByteIsAChecksumErrorNamingTensorAndFile) {
  const std::string path = dir_ + "/step_5/rank_1.bin";
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-8, std::ios::end);  // inside the last value of "w"
    file.put('\x7f');
  }
  EXPECT_THAT(
      CheckpointReader::open(dir_).status(),
      StatusIs(absl::StatusCode::kDataLoss,
               AllOf(HasSubstr("checksum mismatch"), HasSubstr(path), HasSubstr("tensor 'w'"))));
}

TEST_F(LoadErrorsTest, TruncatedOrMissingFilesAreNamed) {
  const std::string path = dir_ + "/step_5/rank_0.bin";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  EXPECT_THAT(
      CheckpointReader::open(dir_).status(),
      StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr(path), HasSubstr("truncated"))));
  std::filesystem::remove(path);
  EXPECT_THAT(CheckpointReader::open(dir_).status(),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr(path), HasSubstr("damaged"))));
}

TEST_F(LoadErrorsTest, CorruptManifestIsNamed) {
  std::ofstream(dir_ + "/step_5/manifest.json") << "{\"format\": 1";
  EXPECT_THAT(CheckpointReader::open(dir_).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("step_5/manifest.json is invalid")));
}

TEST_F(LoadErrorsTest, BadRequestsNameTensorAndBox) {
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> out(12);
  std::vector<int32_t> ints(12);
  EXPECT_THAT(
      reader->readInto("v", Box{{0, 0}, {1, 1}}, out.data()),
      StatusIs(absl::StatusCode::kNotFound, AllOf(HasSubstr("tensor 'v'"), HasSubstr("holds: w"))));
  EXPECT_THAT(
      reader->readInto("w", Box{{2, 0}, {3, 3}}, out.data()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("[2:5, 0:3]"), HasSubstr("tensor 'w'"), HasSubstr("along dim 0"))));
  EXPECT_THAT(reader->readInto("w", Box{{0, 0}, {4, 3}}, ints.data()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is f32, not i32")));
  EXPECT_THAT(CheckpointReader::open(dir_, 6).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("step_6")));
  EXPECT_THAT(latestStep(dir_ + "/nowhere").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no committed checkpoint")));
}

TEST(CheckpointSaveErrorsTest, OverlapsGapsAndRecommitsAreRefused) {
  const std::string dir = freshDir();
  comm::HashStore store;
  const std::vector<float> values(6, 1.0f);
  std::vector<CheckpointWriter> writers = makeWriters(dir, 2);
  auto saveBoth = [&](int64_t step, Box box0, Box box1) {
    std::vector<absl::Status> statuses(2);
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        const ShardView view{"w", DType::kF32, {4, 3}, r == 0 ? box0 : box1, {}, values.data()};
        statuses[r] = writers[r].save(step, {view}, nullptr, store, r, 2, absl::Seconds(5));
      });
    }
    for (std::thread& thread : threads) thread.join();
    return statuses;
  };
  EXPECT_THAT(saveBoth(1, Box{{0, 0}, {2, 3}}, Box{{1, 0}, {2, 3}})[0],
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("overlaps"), HasSubstr("rank 0"))));
  EXPECT_THAT(saveBoth(2, Box{{0, 0}, {2, 3}}, Box{{3, 0}, {1, 3}})[1],
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rank 0 reports"), HasSubstr("cover 9 of its 12"))));
  ASSERT_TRUE(saveBoth(3, Box{{0, 0}, {2, 3}}, Box{{2, 0}, {2, 3}})[0].ok());
  EXPECT_THAT(saveBoth(3, Box{{0, 0}, {2, 3}}, Box{{2, 0}, {2, 3}})[0],
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already committed")));
  EXPECT_EQ(latestOrMinusOne(dir), 3);
}

TEST(PadShardTest, FollowsThePlannersPaddingRule) {
  const std::vector<int64_t> shape = {10, 6};
  const DimSplit last{0, 4, 3};
  absl::StatusOr<PaddedShard> shard = padShard(shape, {&last, 1});
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(shard->box, (Box{{9, 0}, {1, 6}}));
  EXPECT_EQ(shard->local_shape, (std::vector<int64_t>{3, 6}));
  const std::vector<DimSplit> twice = {{0, 2, 0}, {0, 2, 1}};
  EXPECT_THAT(padShard(shape, twice).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("cannot split dim 0")));
}

}  // namespace
}  // namespace loom::runtime::checkpoint
