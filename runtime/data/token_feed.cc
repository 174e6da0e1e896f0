// Synthetic and file-backed token feeds. Each row is a pure function of
// (config, step, global row), which makes the feed layout-independent and
// resumable from a step number alone.
#include "runtime/data/token_feed.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "mesh/shard_math.h"
#include "runtime/init/counter_rng.h"
#include "runtime/kernels/ignore_label.h"

namespace loom::runtime::data {

static_assert(std::endian::native == std::endian::little, "token files store little-endian ids");

namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'T', 'O', 'K', 'S'};
constexpr uint32_t kFormatVersion = 1;
constexpr int64_t kHeaderBytes = 8 + 4 + 4 + 8;
// Rows and positions each fill one 32-bit Philox counter word.
constexpr int64_t kMaxCounterWord = int64_t{1} << 32;

std::array<uint32_t, 2> keyOf(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

int64_t tokenBytes(TokenDType dtype) { return dtype == TokenDType::kU16 ? 2 : 4; }

void putLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
}

uint64_t getLittleEndian(const uint8_t* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{in[i]} << (8 * i);
  return value;
}

}  // namespace

absl::StatusOr<RowRange> dataParallelRows(int64_t global_batch, int64_t dp_ways, int64_t dp_index) {
  absl::StatusOr<mesh::ShardExtent> extent = mesh::shardExtent(global_batch, dp_ways, dp_index);
  if (!extent.ok()) return extent.status();
  return RowRange{extent->begin, extent->valid};
}

absl::Status DataFeed::checkConfig(const FeedConfig& config) {
  if (config.vocab < 1 || config.vocab > std::numeric_limits<int32_t>::max() || config.seq < 1 ||
      config.seq + 1 > kMaxCounterWord || config.global_batch < 1 ||
      config.global_batch > kMaxCounterWord) {
    return absl::InvalidArgumentError(
        absl::StrCat("data feed needs 1 <= vocab < 2^31, 1 <= seq < 2^32 and 1 <= "
                     "global_batch <= 2^32, got vocab ",
                     config.vocab, ", seq ", config.seq, ", global_batch ", config.global_batch));
  }
  return absl::OkStatus();
}

absl::Status DataFeed::batch(int64_t step, int64_t row_begin, int64_t row_count, int32_t* ids,
                             int32_t* labels) const {
  if (step < 0 || row_begin < 0 || row_count < 0 || row_begin + row_count > config_.global_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows [", row_begin, ", ", row_begin + row_count, ") of step ", step,
                     " are not inside the global batch of ", config_.global_batch,
                     " rows; take them from dataParallelRows"));
  }
  const int64_t seq = config_.seq;
  std::vector<int32_t> tokens(static_cast<size_t>(seq + 1));
  for (int64_t r = 0; r < row_count; ++r) {
    if (!hasWindow(step, row_begin + r)) {
      std::fill_n(ids + r * seq, seq, 0);
      std::fill_n(labels + r * seq, seq, kIgnoreLabel);
      continue;
    }
    if (absl::Status s = window(step, row_begin + r, tokens.data()); !s.ok()) {
      return s;
    }
    std::memcpy(ids + r * seq, tokens.data(), seq * sizeof(int32_t));
    std::memcpy(labels + r * seq, tokens.data() + 1, seq * sizeof(int32_t));
  }
  return absl::OkStatus();
}

bool DataFeed::exhausted(int64_t step, int64_t row_begin, int64_t row_count) const {
  for (int64_t r = row_begin; r < row_begin + row_count; ++r) {
    if (hasWindow(step, r)) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<SyntheticTokens>> SyntheticTokens::create(const FeedConfig& config) {
  if (absl::Status s = checkConfig(config); !s.ok()) return s;
  return std::unique_ptr<SyntheticTokens>(new SyntheticTokens(config));
}

absl::Status SyntheticTokens::window(int64_t step, int64_t row, int32_t* window) const {
  const uint64_t vocab = static_cast<uint64_t>(config().vocab);
  for (int64_t p = 0; p <= config().seq; ++p) {
    const uint32_t word =
        init::philox4x32({static_cast<uint32_t>(p), static_cast<uint32_t>(row),
                          static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)},
                         keyOf(config().seed))[0];
    // Multiply-shift maps a 32-bit word onto [0, vocab) without division.
    window[p] = static_cast<int32_t>((uint64_t{word} * vocab) >> 32);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::open(const std::string& path,
                                                           const FeedConfig& config) {
  if (absl::Status s = checkConfig(config); !s.ok()) return s;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string message =
        absl::StrCat("cannot open token file ", path, ": ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  auto fail = [&](absl::string_view detail) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " ", detail));
  };
  struct stat info;
  uint8_t header[kHeaderBytes];
  if (::fstat(fd, &info) != 0 || info.st_size < kHeaderBytes ||
      ::pread(fd, header, kHeaderBytes, 0) != kHeaderBytes) {
    return fail(absl::StrCat("is shorter than its ", kHeaderBytes,
                             "-byte header; write it with writeTokenFile"));
  }
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0) {
    return fail(
        "has the wrong magic: it is not a Loom token file; convert "
        "it with convertTextToTokenFile or writeTokenFile");
  }
  const uint64_t version = getLittleEndian(header + 8, 4);
  const uint64_t dtype = getLittleEndian(header + 12, 4);
  const int64_t count = static_cast<int64_t>(getLittleEndian(header + 16, 8));
  if (version != kFormatVersion) {
    return fail(
        absl::StrCat("has format version ", version, ", this build reads ", kFormatVersion));
  }
  if (dtype != static_cast<uint32_t>(TokenDType::kU16) &&
      dtype != static_cast<uint32_t>(TokenDType::kI32)) {
    return fail(absl::StrCat("has unknown dtype code ", dtype, " (1 = u16, 2 = i32)"));
  }
  const TokenDType token_dtype = static_cast<TokenDType>(dtype);
  const int64_t expected = kHeaderBytes + count * tokenBytes(token_dtype);
  if (count < 0 || info.st_size != expected) {
    return fail(absl::StrCat("declares ", count, " tokens (", expected, " bytes) but has ",
                             info.st_size, " bytes; it is truncated or corrupt"));
  }
  if (count < config.seq + 1) {
    return fail(absl::StrCat("holds ", count,
                             " tokens, fewer than one window of seq + 1 = ", config.seq + 1,
                             "; use a longer file or a "
                             "shorter seq"));
  }
  return std::unique_ptr<TokenFile>(new TokenFile(config, path, fd, token_dtype, count));
}

TokenFile::~TokenFile() { ::close(fd_); }

absl::Status TokenFile::window(int64_t step, int64_t row, int32_t* window) const {
  const std::array<uint32_t, 4> words =
      init::philox4x32({static_cast<uint32_t>(row), static_cast<uint32_t>(row >> 32),
                        static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)},
                       keyOf(config().seed));
  const uint64_t windows = static_cast<uint64_t>(count_ - config().seq);
  const int64_t start = static_cast<int64_t>(((uint64_t{words[1]} << 32) | words[0]) % windows);
  return readWindow(start, step, row, window);
}

absl::Status TokenFile::readWindow(int64_t start, int64_t step, int64_t row,
                                   int32_t* window) const {
  if (start < 0 || start + config().seq + 1 > count_) {
    return absl::InvalidArgumentError(absl::StrCat("tokens [", start, ", ",
                                                   start + config().seq + 1, ") are not inside ",
                                                   path_, "'s ", count_, " tokens"));
  }
  const int64_t width = tokenBytes(dtype_);
  const int64_t length = config().seq + 1;
  std::vector<uint8_t> bytes(static_cast<size_t>(length * width));
  const off_t offset = static_cast<off_t>(kHeaderBytes + start * width);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n =
        ::pread(fd_, bytes.data() + done, bytes.size() - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat("cannot read tokens [", start, ", ", start + length,
                                              ") of ", path_, ": ",
                                              n < 0 ? std::strerror(errno) : "the file shrank"));
    }
    done += static_cast<size_t>(n);
  }
  for (int64_t i = 0; i < length; ++i) {
    const int64_t token = dtype_ == TokenDType::kU16
                              ? static_cast<int64_t>(getLittleEndian(&bytes[i * width], 2))
                              : static_cast<int32_t>(getLittleEndian(&bytes[i * width], 4));
    if (token < 0 || token >= config().vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", token, " at position ", start + i, " of token file ", path_,
                       " (step ", step, ", row ", row, ") is outside [0, ", config().vocab,
                       "); the file was made for another vocabulary"));
    }
    window[i] = static_cast<int32_t>(token);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TokenFilePass>> TokenFilePass::open(
    const std::vector<std::string>& paths, const FeedConfig& config) {
  if (absl::Status s = checkConfig(config); !s.ok()) return s;
  if (paths.empty()) {
    return absl::InvalidArgumentError("--data=epoch: needs token files: --data=epoch:A.tok,B.tok");
  }
  const auto k = static_cast<int64_t>(paths.size());
  std::unique_ptr<TokenFilePass> pass(new TokenFilePass(config));
  for (int64_t i = 0; i < k; ++i) {
    if (paths[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data=epoch: file ", i + 1, " of ", k, " has an empty path"));
    }
    absl::StatusOr<RowRange> rows = dataParallelRows(config.global_batch, k, i);
    if (!rows.ok()) return rows.status();
    if (rows->count == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data=epoch: ", k, " files for a step batch of ", config.global_batch,
                       " rows leave file ", i + 1, " (", paths[i],
                       ") without rows; pass a number of files that divides the rows"));
    }
    absl::StatusOr<std::unique_ptr<TokenFile>> file = TokenFile::open(paths[i], config);
    if (!file.ok()) return file.status();
    pass->windows_.push_back(((*file)->tokenCount() - 1) / config.seq);
    pass->files_.push_back(*std::move(file));
    pass->rows_.push_back(*rows);
  }
  return pass;
}

std::pair<size_t, int64_t> TokenFilePass::locate(int64_t step, int64_t row) const {
  size_t k = 0;
  while (k + 1 < rows_.size() && row >= rows_[k].begin + rows_[k].count) ++k;
  return {k, (step - 1) * rows_[k].count + (row - rows_[k].begin)};
}

bool TokenFilePass::hasWindow(int64_t step, int64_t row) const {
  if (step < 1) return false;
  const auto [k, w] = locate(step, row);
  return w < windows_[k];
}

absl::Status TokenFilePass::window(int64_t step, int64_t row, int32_t* window) const {
  const auto [k, w] = locate(step, row);
  return files_[k]->readWindow(w * config().seq, step, row, window);
}

absl::Status writeTokenFile(const std::string& path, std::span<const int32_t> tokens,
                            TokenDType dtype) {
  const int64_t limit =
      dtype == TokenDType::kU16 ? int64_t{65535} : std::numeric_limits<int32_t>::max();
  std::string content(kMagic, sizeof(kMagic));
  putLittleEndian(content, kFormatVersion, 4);
  putLittleEndian(content, static_cast<uint32_t>(dtype), 4);
  putLittleEndian(content, tokens.size(), 8);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", tokens[i], " at position ", i, " does not fit a ",
          dtype == TokenDType::kU16 ? "u16" : "i32", " token file (ids lie in [0, ", limit, "])"));
    }
    putLittleEndian(content, static_cast<uint32_t>(tokens[i]), static_cast<int>(tokenBytes(dtype)));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) {
    return absl::InternalError(absl::StrCat("cannot write token file ", path));
  }
  return absl::OkStatus();
}

absl::Status convertTextToTokenFile(const std::string& text_path, const std::string& out_path,
                                    TokenDType dtype) {
  std::ifstream in(text_path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open token text file ", text_path));
  }
  std::vector<int32_t> tokens;
  std::string entry;
  while (in >> entry) {
    int32_t token = 0;
    if (!absl::SimpleAtoi(entry, &token) || token < 0) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", tokens.size(), " of ", text_path,
                                                     " is '", entry,
                                                     "', not a non-negative token id"));
    }
    tokens.push_back(token);
  }
  return writeTokenFile(out_path, tokens, dtype);
}

absl::StatusOr<std::unique_ptr<DataFeed>> openDataFeed(absl::string_view spec,
                                                       const FeedConfig& config) {
  if (spec.empty()) {
    return absl::InvalidArgumentError("--data is empty; pass --data=synthetic or --data=FILE");
  }
  if (spec == "synthetic") {
    absl::StatusOr<std::unique_ptr<SyntheticTokens>> feed = SyntheticTokens::create(config);
    if (!feed.ok()) return feed.status();
    return std::unique_ptr<DataFeed>(*std::move(feed));
  }
  if (absl::ConsumePrefix(&spec, "epoch:")) {
    absl::StatusOr<std::unique_ptr<TokenFilePass>> pass =
        TokenFilePass::open(absl::StrSplit(spec, ','), config);
    if (!pass.ok()) return pass.status();
    return std::unique_ptr<DataFeed>(*std::move(pass));
  }
  absl::StatusOr<std::unique_ptr<TokenFile>> feed = TokenFile::open(std::string(spec), config);
  if (!feed.ok()) return feed.status();
  return std::unique_ptr<DataFeed>(*std::move(feed));
}

}  // namespace loom::runtime::data
