// Tests of the data feed: every layout reads the same global batch, labels
// are the next tokens, the Philox rule is the documented one, token files
// round-trip, and bad files and requests get clear errors.
#include "runtime/data/token_feed.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/init/counter_rng.h"
#include "runtime/kernels/ignore_label.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime::data {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr FeedConfig kConfig{.seed = 1234, .vocab = 50, .seq = 6, .global_batch = 8};

std::string tempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

struct Batch {
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;
};

// Step `step`'s global batch as `dp_ways` ranks read it, each its own rows.
Batch readAsRanks(const DataFeed& feed, int64_t step, int64_t dp_ways) {
  const FeedConfig& config = feed.config();
  Batch batch{std::vector<int32_t>(config.global_batch * config.seq, -1),
              std::vector<int32_t>(config.global_batch * config.seq, -1)};
  for (int64_t r = 0; r < dp_ways; ++r) {
    absl::StatusOr<RowRange> rows = dataParallelRows(config.global_batch, dp_ways, r);
    EXPECT_TRUE(rows.ok()) << rows.status();
    const int64_t at = rows->begin * config.seq;
    EXPECT_TRUE(feed.batch(step, rows->begin, rows->count, &batch.ids[at], &batch.labels[at]).ok());
  }
  return batch;
}

void expectLabelsAreTheShift(const Batch& batch, int64_t seq) {
  for (size_t row = 0; row < batch.ids.size() / seq; ++row) {
    for (int64_t p = 0; p + 1 < seq; ++p) {
      EXPECT_EQ(batch.labels[row * seq + p], batch.ids[row * seq + p + 1]);
    }
  }
}

TEST(DataParallelRowsTest, SplitsWithThePaddingRule) {
  EXPECT_EQ(*dataParallelRows(8, 4, 1), (RowRange{2, 2}));
  EXPECT_EQ(*dataParallelRows(10, 4, 3), (RowRange{9, 1}));
  EXPECT_EQ(*dataParallelRows(2, 4, 3), (RowRange{2, 0}));
  EXPECT_THAT(dataParallelRows(8, 4, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
}

TEST(SyntheticTokensTest, EveryLayoutReadsTheSameBatch) {
  absl::StatusOr<std::unique_ptr<SyntheticTokens>> feed = SyntheticTokens::create(kConfig);
  ASSERT_TRUE(feed.ok()) << feed.status();
  const Batch one = readAsRanks(**feed, 3, 1);
  const Batch four = readAsRanks(**feed, 3, 4);
  EXPECT_EQ(one.ids, four.ids);
  EXPECT_EQ(one.labels, four.labels);
  EXPECT_EQ(one.ids, readAsRanks(**feed, 3, 3).ids);
  EXPECT_NE(one.ids, readAsRanks(**feed, 4, 1).ids);
  expectLabelsAreTheShift(one, kConfig.seq);
  for (int32_t id : one.ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, kConfig.vocab);
  }
}

TEST(SyntheticTokensTest, FollowsTheDocumentedPhiloxRule) {
  absl::StatusOr<std::unique_ptr<SyntheticTokens>> feed = SyntheticTokens::create(kConfig);
  ASSERT_TRUE(feed.ok());
  std::vector<int32_t> ids(kConfig.seq);
  std::vector<int32_t> labels(kConfig.seq);
  const int64_t step = (int64_t{1} << 32) + 7;
  ASSERT_TRUE((*feed)->batch(step, 5, 1, ids.data(), labels.data()).ok());
  // Position 2 of row 5: counter (2, 5, step lo, step hi), key (seed, 0).
  const uint32_t word = init::philox4x32({2, 5, 7, 1}, {1234, 0})[0];
  EXPECT_EQ(ids[2], static_cast<int32_t>((uint64_t{word} * 50) >> 32));
}

TEST(TokenFileTest, RoundTripsAndEveryLayoutReadsTheSameBatch) {
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 40; ++i) tokens.push_back(i);
  for (TokenDType dtype : {TokenDType::kU16, TokenDType::kI32}) {
    const std::string path = tempPath("round_trip.tok");
    ASSERT_TRUE(writeTokenFile(path, tokens, dtype).ok());
    absl::StatusOr<std::unique_ptr<TokenFile>> feed = TokenFile::open(path, kConfig);
    ASSERT_TRUE(feed.ok()) << feed.status();
    EXPECT_EQ((*feed)->tokenCount(), 40);
    const Batch one = readAsRanks(**feed, 2, 1);
    const Batch four = readAsRanks(**feed, 2, 4);
    EXPECT_EQ(one.ids, four.ids);
    EXPECT_EQ(one.labels, four.labels);
    expectLabelsAreTheShift(one, kConfig.seq);
    // The file holds 0..39, so each row is a run of consecutive ids and its
    // labels end one past its ids.
    for (int64_t row = 0; row < kConfig.global_batch; ++row) {
      const int32_t first = one.ids[row * kConfig.seq];
      for (int64_t p = 0; p < kConfig.seq; ++p) {
        EXPECT_EQ(one.ids[row * kConfig.seq + p], first + p);
        EXPECT_EQ(one.labels[row * kConfig.seq + p], first + p + 1);
      }
    }
  }
}

TEST(TokenFileTest, ConvertsTextAndOpensThroughDataSpec) {
  const std::string text = tempPath("tokens.txt");
  std::ofstream(text) << "3 1 4 1 5\n9 2 6 5 3\n5 8\n";
  const std::string path = tempPath("converted.tok");
  ASSERT_TRUE(convertTextToTokenFile(text, path, TokenDType::kU16).ok());
  const FeedConfig config{.seed = 9, .vocab = 10, .seq = 11, .global_batch = 2};
  absl::StatusOr<std::unique_ptr<DataFeed>> feed = openDataFeed(path, config);
  ASSERT_TRUE(feed.ok()) << feed.status();
  std::vector<int32_t> ids(11);
  std::vector<int32_t> labels(11);
  ASSERT_TRUE((*feed)->batch(0, 1, 1, ids.data(), labels.data()).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}));
  EXPECT_EQ(labels, (std::vector<int32_t>{1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}));
  absl::StatusOr<std::unique_ptr<DataFeed>> synthetic = openDataFeed("synthetic", config);
  ASSERT_TRUE(synthetic.ok());
  std::vector<int32_t> both_ids(2 * 11);
  std::vector<int32_t> both_labels(2 * 11);
  EXPECT_TRUE((*synthetic)->batch(0, 0, 2, both_ids.data(), both_labels.data()).ok());

  std::ofstream(text) << "3 x 4";
  EXPECT_THAT(convertTextToTokenFile(text, path, TokenDType::kU16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("entry 1 of")));
}

TEST(TokenFileTest, BadFilesAreRefusedWithTheReason) {
  const std::string path = tempPath("bad.tok");
  std::vector<int32_t> tokens(6, 1);
  ASSERT_TRUE(writeTokenFile(path, tokens, TokenDType::kI32).ok());
  EXPECT_THAT(TokenFile::open(path, kConfig).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(path), HasSubstr("holds 6 tokens"))));

  tokens.assign(20, 1);
  ASSERT_TRUE(writeTokenFile(path, tokens, TokenDType::kI32).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  EXPECT_THAT(TokenFile::open(path, kConfig).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("truncated")));

  std::ofstream(path) << "NOTATOKENFILE-----------";
  EXPECT_THAT(TokenFile::open(path, kConfig).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("wrong magic")));
  EXPECT_THAT(TokenFile::open(tempPath("missing.tok"), kConfig).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing.tok")));
  EXPECT_THAT(writeTokenFile(path, std::vector<int32_t>{70000}, TokenDType::kU16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not fit a u16")));
}

TEST(TokenFileTest, TokenOutsideTheVocabularyNamesItsPosition) {
  // Exactly one window, so row 0 starts at position 0 and meets token 99.
  std::vector<int32_t> tokens(kConfig.seq + 1, 1);
  tokens[4] = 99;
  const std::string path = tempPath("vocab.tok");
  ASSERT_TRUE(writeTokenFile(path, tokens, TokenDType::kU16).ok());
  absl::StatusOr<std::unique_ptr<TokenFile>> feed = TokenFile::open(path, kConfig);
  ASSERT_TRUE(feed.ok()) << feed.status();
  std::vector<int32_t> ids(kConfig.seq);
  std::vector<int32_t> labels(kConfig.seq);
  EXPECT_THAT((*feed)->batch(0, 0, 1, ids.data(), labels.data()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("token 99 at position 4"), HasSubstr("outside [0, 50)"))));
}

// One pass over three files (kConfig: seq 6, 8 rows per step, so rows
// [0, 3), [3, 6) and [6, 8) read files 1, 2 and 3): windows follow one
// another at stride seq, rows past a file's end carry kIgnoreLabel, and every
// layout still reads the same batch.
TEST(TokenFilePassTest, ReadsEachFileOnceInOrderAndMarksTheEnd) {
  // File k's token i is 100 * k + i % 100 (vocab 400 below); windows 7, 4, 2.
  const std::vector<int64_t> lengths = {7 * 6 + 1, 4 * 6 + 3, 2 * 6 + 1};
  std::vector<std::string> paths;
  for (size_t k = 0; k < lengths.size(); ++k) {
    std::vector<int32_t> tokens(lengths[k]);
    for (int64_t i = 0; i < lengths[k]; ++i) tokens[i] = static_cast<int32_t>(100 * k + i % 100);
    paths.push_back(tempPath("pass" + std::to_string(k) + ".tok"));
    ASSERT_TRUE(writeTokenFile(paths.back(), tokens, TokenDType::kU16).ok());
  }
  FeedConfig config = kConfig;
  config.vocab = 400;
  absl::StatusOr<std::unique_ptr<DataFeed>> feed =
      openDataFeed("epoch:" + paths[0] + "," + paths[1] + "," + paths[2], config);
  ASSERT_TRUE(feed.ok()) << feed.status();
  EXPECT_TRUE((*feed)->finite());
  const int64_t seq = config.seq;
  for (int64_t step = 1; step <= 3; ++step) {
    const Batch batch = readAsRanks(**feed, step, 1);
    EXPECT_EQ(readAsRanks(**feed, step, 4).labels, batch.labels) << "step " << step;
    for (int64_t row = 0; row < config.global_batch; ++row) {
      const int64_t k = row < 3 ? 0 : row < 6 ? 1 : 2;
      const int64_t rows = k == 2 ? 2 : 3, j = row - (k == 0 ? 0 : k == 1 ? 3 : 6);
      const int64_t window = (step - 1) * rows + j;
      const int64_t windows = std::vector<int64_t>{7, 4, 2}[k];
      for (int64_t p = 0; p < seq; ++p) {
        const int32_t id = batch.ids[row * seq + p], label = batch.labels[row * seq + p];
        if (window < windows) {
          EXPECT_EQ(id, 100 * k + window * seq + p) << "step " << step << " row " << row;
          EXPECT_EQ(label, id + 1);
        } else {
          EXPECT_EQ(id, 0);
          EXPECT_EQ(label, kIgnoreLabel) << "step " << step << " row " << row;
        }
      }
    }
  }
  // Step 2: file 3's rows are past its 2 windows; step 3: only file 1's
  // window 6 is left.
  EXPECT_FALSE((*feed)->exhausted(1, 6, 2));
  EXPECT_TRUE((*feed)->exhausted(2, 6, 2));
  EXPECT_FALSE((*feed)->exhausted(3, 0, 1));
  EXPECT_TRUE((*feed)->exhausted(3, 1, 7));
  EXPECT_TRUE((*feed)->exhausted(4, 0, 8));
}

TEST(TokenFilePassTest, BadSpecsAreRefusedWithTheReason) {
  const std::string path = tempPath("pass_bad.tok");
  ASSERT_TRUE(writeTokenFile(path, std::vector<int32_t>(20, 1), TokenDType::kU16).ok());
  EXPECT_THAT(openDataFeed("epoch:", kConfig).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty path")));
  EXPECT_THAT(openDataFeed("epoch:" + path + ",", kConfig).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("file 2 of 2")));
  FeedConfig two = kConfig;
  two.global_batch = 2;
  EXPECT_THAT(openDataFeed("epoch:" + path + "," + path + "," + path, two).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("without rows")));
  EXPECT_THAT(openDataFeed("epoch:" + path + ",/nonexistent.tok", kConfig).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent.tok")));
}

TEST(DataFeedTest, BadConfigAndRowsAreRefused) {
  EXPECT_THAT(
      SyntheticTokens::create({.seed = 0, .vocab = 0, .seq = 4, .global_batch = 2}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got vocab 0")));
  absl::StatusOr<std::unique_ptr<SyntheticTokens>> feed = SyntheticTokens::create(kConfig);
  ASSERT_TRUE(feed.ok());
  std::vector<int32_t> ids(3 * kConfig.seq);
  std::vector<int32_t> labels(3 * kConfig.seq);
  EXPECT_THAT((*feed)->batch(0, 6, 3, ids.data(), labels.data()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rows [6, 9) of step 0")));
  EXPECT_THAT(openDataFeed("", kConfig).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--data=synthetic")));
}

}  // namespace
}  // namespace loom::runtime::data
