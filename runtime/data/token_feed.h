// The training data feed: a global batch of token windows per step whose
// content depends only on (seed, step, global row, position), never on the
// layout, so every sharding of a model trains on the same data; each rank
// reads only the rows its data-parallel coordinate owns.
#ifndef LOOM_RUNTIME_DATA_TOKEN_FEED_H_
#define LOOM_RUNTIME_DATA_TOKEN_FEED_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace loom::runtime::data {

struct FeedConfig {
  uint64_t seed = 0;
  int64_t vocab = 0;         // token ids lie in [0, vocab)
  int64_t seq = 0;           // tokens per row; a window holds seq + 1
  int64_t global_batch = 0;  // rows per step over all ranks
};

struct RowRange {
  int64_t begin = 0;
  int64_t count = 0;

  friend bool operator==(const RowRange&, const RowRange&) = default;
};

// The rows of the global batch that data-parallel index `dp_index` of
// `dp_ways` reads, under the planner's padding rule (ceil(n/k) rows each,
// the last ranks may get fewer or none).
absl::StatusOr<RowRange> dataParallelRows(int64_t global_batch, int64_t dp_ways, int64_t dp_index);

class DataFeed {
 public:
  virtual ~DataFeed() = default;
  DataFeed(const DataFeed&) = delete;
  DataFeed& operator=(const DataFeed&) = delete;

  const FeedConfig& config() const { return config_; }

  // Fills `ids` and `labels`, each row-major [row_count, seq], with rows
  // [row_begin, row_begin + row_count) of step `step`'s global batch. A row
  // is a window of seq + 1 tokens: ids are its first seq, labels its last seq
  // (the next token). Stateless, so resuming at a step needs only the step.
  // A row a finite feed has no window for gets ids 0 and labels
  // kIgnoreLabel (runtime/kernels/ignore_label.h): zero loss and gradient.
  absl::Status batch(int64_t step, int64_t row_begin, int64_t row_count, int32_t* ids,
                     int32_t* labels) const;

  // Whether the feed ends (a finite pass over its data) or goes on forever.
  virtual bool finite() const { return false; }
  // True when none of rows [row_begin, row_begin + row_count) of step `step`
  // has data: a rank whose rows are all exhausted has no inputs left (and,
  // since a finite feed only runs out, has none at any later step either).
  bool exhausted(int64_t step, int64_t row_begin, int64_t row_count) const;

 protected:
  explicit DataFeed(const FeedConfig& config) : config_(config) {}

  // Writes the seq + 1 tokens of (step, row) to `window`; called only where
  // hasWindow(step, row).
  virtual absl::Status window(int64_t step, int64_t row, int32_t* window) const = 0;
  // Whether (step, row) has data; always for an endless feed.
  virtual bool hasWindow(int64_t step, int64_t row) const {
    (void)step;
    (void)row;
    return true;
  }

  // InvalidArgument unless vocab, seq and global_batch are in range.
  static absl::Status checkConfig(const FeedConfig& config);

 private:
  FeedConfig config_;
};

// Synthetic tokens: token (step, row, position) is Philox4x32-10 of counter
// (position, row, step lo, step hi) under key (seed lo, seed hi), first word
// scaled into [0, vocab).
class SyntheticTokens final : public DataFeed {
 public:
  static absl::StatusOr<std::unique_ptr<SyntheticTokens>> create(const FeedConfig& config);

 private:
  explicit SyntheticTokens(const FeedConfig& config) : DataFeed(config) {}
  absl::Status window(int64_t step, int64_t row, int32_t* window) const override;
};

// How a token file stores its ids; the values are the on-disk codes.
enum class TokenDType : uint32_t { kU16 = 1, kI32 = 2 };

// A flat token file (format in docs/runtime_data.md). Row (step, row) is the
// window of seq + 1 tokens starting at Philox4x32-10 of counter (row lo, row
// hi, step lo, step hi) under key (seed lo, seed hi), words 0 and 1 as a
// 64-bit number, modulo the number of windows (count - seq).
class TokenFile final : public DataFeed {
 public:
  // InvalidArgument for a bad config, a wrong magic, version or dtype, a
  // size that disagrees with the header, or fewer than seq + 1 tokens.
  static absl::StatusOr<std::unique_ptr<TokenFile>> open(const std::string& path,
                                                         const FeedConfig& config);
  ~TokenFile() override;

  int64_t tokenCount() const { return count_; }
  // Reads the seq + 1 tokens at token position `start` into `window`;
  // `step` and `row` only name the row in errors.
  absl::Status readWindow(int64_t start, int64_t step, int64_t row, int32_t* window) const;

 private:
  TokenFile(const FeedConfig& config, std::string path, int fd, TokenDType dtype, int64_t count)
      : DataFeed(config), path_(std::move(path)), fd_(fd), dtype_(dtype), count_(count) {}
  // InvalidArgument naming the file position of a token outside [0, vocab).
  absl::Status window(int64_t step, int64_t row, int32_t* window) const override;

  std::string path_;
  int fd_;
  TokenDType dtype_;
  int64_t count_;
};

// One pass over token files, in order (`--data=epoch:A[,B...]`, the rule in
// docs/runtime_data.md): file k holds floor((count_k - 1) / seq) windows at
// stride seq, each token a label once. The step batch's rows are split over
// the K files by dataParallelRows(global_batch, K, k); row j of file k's
// rows in step s (1-based) reads window (s - 1) * rows_k + j, and a row past
// the file's last window has no data. With K files for K data-parallel
// ranks each rank reads one file; files of different lengths run out at
// different steps, which is what --uneven_inputs=join is for.
class TokenFilePass final : public DataFeed {
 public:
  // InvalidArgument for no files, a file TokenFile::open refuses, or more
  // files than the step batch has rows to give them.
  static absl::StatusOr<std::unique_ptr<TokenFilePass>> open(const std::vector<std::string>& paths,
                                                             const FeedConfig& config);

  bool finite() const override { return true; }
  // Windows in file k (k < fileCount()).
  int64_t fileWindows(size_t k) const { return windows_[k]; }
  size_t fileCount() const { return files_.size(); }

 private:
  explicit TokenFilePass(const FeedConfig& config) : DataFeed(config) {}
  // The file of step-batch row `row`, and the window it reads at `step` (may
  // lie past the file's end).
  std::pair<size_t, int64_t> locate(int64_t step, int64_t row) const;
  absl::Status window(int64_t step, int64_t row, int32_t* window) const override;
  bool hasWindow(int64_t step, int64_t row) const override;

  std::vector<std::unique_ptr<TokenFile>> files_;
  std::vector<int64_t> windows_;  // per file
  std::vector<RowRange> rows_;    // per file, of the step batch
};

// Writes `tokens` as a token file. InvalidArgument when a token does not fit
// `dtype` (u16 holds [0, 65535], i32 holds [0, 2^31)).
absl::Status writeTokenFile(const std::string& path, std::span<const int32_t> tokens,
                            TokenDType dtype);

// Converts a text file of whitespace-separated decimal token ids into a
// token file; InvalidArgument naming the first entry that is not a token id.
absl::Status convertTextToTokenFile(const std::string& text_path, const std::string& out_path,
                                    TokenDType dtype);

// `--data=`: "synthetic", the path of a token file (random windows, without
// end), or "epoch:" and a comma-separated list of token files (one pass).
absl::StatusOr<std::unique_ptr<DataFeed>> openDataFeed(absl::string_view spec,
                                                       const FeedConfig& config);

}  // namespace loom::runtime::data

#endif  // LOOM_RUNTIME_DATA_TOKEN_FEED_H_
