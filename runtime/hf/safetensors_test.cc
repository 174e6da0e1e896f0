// Tests of the safetensors reader and writer: round trips in each dtype,
// strided boxes read with only their bytes, sharded files with an index, and
// every malformed-file error naming the file and the tensor.
#include "runtime/hf/safetensors.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime::hf {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::string freshDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/st_", info->test_suite_name(), "_", info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<float> iota(int64_t n, float start = 0) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// A file of `header` (JSON, as given) and `data_bytes` zero bytes, with the
// length prefix `length` (default: the header's).
void writeRaw(const std::string& path, const std::string& header, int64_t data_bytes,
              int64_t length = -1) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = length < 0 ? header.size() : static_cast<uint64_t>(length);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
}

TEST(Safetensors, RoundTripsEveryDtypeAndBox) {
  const std::string path = freshDir() + "/model.safetensors";
  // Small integers are exact in F16 and BF16.
  ASSERT_TRUE(writeSafetensors(path,
                               {{{"a", StDType::kF32, {4, 6}}, iota(24)},
                                {{"b", StDType::kBF16, {3, 2, 5}}, iota(30, -7)},
                                {{"c", StDType::kF16, {7}}, iota(7, 100)},
                                {{"scalar", StDType::kF32, {}}, {2.5f}}},
                               {{"format", "pt"}})
                  .ok());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->header().metadata.at("format"), "pt");
  std::vector<float> all(24);
  ASSERT_TRUE(file->readBox("a", {{0, 0}, {4, 6}}, all).ok());
  EXPECT_EQ(all, iota(24));
  // Rows 1..2, columns 2..4: strided in the file.
  std::vector<float> box(6);
  ASSERT_TRUE(file->readBox("a", {{1, 2}, {2, 3}}, box).ok());
  EXPECT_THAT(box, ElementsAre(8, 9, 10, 14, 15, 16));
  std::vector<float> b(2 * 2 * 2);
  ASSERT_TRUE(file->readBox("b", {{1, 0, 3}, {2, 2, 2}}, b).ok());
  EXPECT_THAT(b, ElementsAre(6, 7, 11, 12, 16, 17, 21, 22));
  std::vector<float> c(3);
  ASSERT_TRUE(file->readBox("c", {{4}, {3}}, c).ok());
  EXPECT_THAT(c, ElementsAre(104, 105, 106));
  std::vector<float> s(1);
  ASSERT_TRUE(file->readBox("scalar", {{}, {}}, s).ok());
  EXPECT_EQ(s[0], 2.5f);
}

TEST(Safetensors, ReadsOnlyTheBoxBytes) {
  const std::string path = freshDir() + "/model.safetensors";
  ASSERT_TRUE(writeSafetensors(path, {{{"w", StDType::kF32, {64, 32}}, iota(64 * 32)}}).ok());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<float> box(16 * 8);
  ASSERT_TRUE(file->readBox("w", {{16, 8}, {16, 8}}, box).ok());
  EXPECT_EQ(file->bytesRead(), 16 * 8 * 4);
  EXPECT_EQ(box[0], 16 * 32 + 8);
  EXPECT_EQ(box.back(), 31 * 32 + 15);
}

TEST(Safetensors, RoundsToNearestEvenOnWrite) {
  const std::string path = freshDir() + "/model.safetensors";
  // 1 + 2^-8 is halfway between two bf16 neighbours: even is 1.
  ASSERT_TRUE(
      writeSafetensors(path, {{{"w", StDType::kBF16, {2}}, {1.00390625f, 1.01171875f}}}).ok());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok());
  std::vector<float> v(2);
  ASSERT_TRUE(file->readBox("w", {{0}, {2}}, v).ok());
  EXPECT_THAT(v, ElementsAre(1.0f, 1.015625f));
}

TEST(Safetensors, ShardedWithIndex) {
  const std::string dir = freshDir();
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 5; ++i) specs.push_back({absl::StrCat("t", i), StDType::kF32, {10}});
  const std::vector<std::vector<TensorSpec>> files = splitIntoFiles(specs, 80);
  ASSERT_EQ(files.size(), 3u);  // 2 + 2 + 1 tensors of 40 bytes
  for (size_t f = 0; f < files.size(); ++f) {
    std::vector<TensorData> data;
    for (const TensorSpec& t : files[f]) data.push_back({t, iota(10, 10.0f * (t.name[1] - '0'))});
    ASSERT_TRUE(writeSafetensors(dir + "/" + shardFileName(f + 1, files.size()), data).ok());
  }
  std::ofstream(dir + "/" + kIndexFileName) << indexJson(files);
  absl::StatusOr<SafetensorsSet> set = SafetensorsSet::open(dir);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->names(), ElementsAre("t0", "t1", "t2", "t3", "t4"));
  EXPECT_THAT(set->fileOf("t4")->path(), HasSubstr("model-00003-of-00003.safetensors"));
  std::vector<float> v(2);
  ASSERT_TRUE(set->readBox("t3", {{4}, {2}}, v).ok());
  EXPECT_THAT(v, ElementsAre(34, 35));
  EXPECT_THAT(set->readBox("t9", {{0}, {1}}, std::span<float>(v).first(1)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no tensor 't9'")));

  // An index naming a file that lacks the tensor.
  std::ofstream(dir + "/" + kIndexFileName)
      << R"({"weight_map": {"t0": "model-00002-of-00003.safetensors"}})";
  EXPECT_THAT(SafetensorsSet::open(dir).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("tensor 't0'"), HasSubstr("model-00002-of-00003"))));
  // A missing shard.
  std::filesystem::remove(dir + "/model-00003-of-00003.safetensors");
  std::ofstream(dir + "/" + kIndexFileName) << indexJson(files);
  EXPECT_THAT(SafetensorsSet::open(dir).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("model-00003-of-00003")));
}

TEST(Safetensors, TensorInTwoShardsIsRefused) {
  const std::string dir = freshDir();
  ASSERT_TRUE(writeSafetensors(dir + "/a.safetensors", {{{"w", StDType::kF32, {1}}, {1}}}).ok());
  ASSERT_TRUE(writeSafetensors(dir + "/b.safetensors", {{{"w", StDType::kF32, {1}}, {2}}}).ok());
  std::ofstream(dir + "/" + kIndexFileName)
      << R"({"weight_map": {"w": "a.safetensors", "x": "b.safetensors"}})";
  EXPECT_THAT(
      SafetensorsSet::open(dir + "/" + kIndexFileName).status(),
      StatusIs(absl::StatusCode::kDataLoss,
               AllOf(HasSubstr("'w'"), HasSubstr("a.safetensors"), HasSubstr("b.safetensors"))));
}

TEST(Safetensors, DirectoryWithoutWeights) {
  EXPECT_THAT(SafetensorsSet::open(freshDir()).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("model.safetensors")));
}

struct Malformed {
  const char* what;
  std::string header;
  int64_t data_bytes;
  int64_t length;  // -1: the header's
  absl::StatusCode code;
  std::string message;
};

class MalformedFile : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedFile, IsRefusedNamingFileAndTensor) {
  const Malformed& m = GetParam();
  const std::string path = freshDir() + "/bad.safetensors";
  writeRaw(path, m.header, m.data_bytes, m.length);
  EXPECT_THAT(SafetensorsFile::open(path).status(),
              StatusIs(m.code, AllOf(HasSubstr(path), HasSubstr(m.message))))
      << m.what;
}

const std::string kGood = R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";

INSTANTIATE_TEST_SUITE_P(
    Errors, MalformedFile,
    ::testing::Values(
        Malformed{"header length past the end", kGood, 24, 1 << 20, absl::StatusCode::kDataLoss,
                  "past the file's"},
        Malformed{"truncated data", kGood, 20, -1, absl::StatusCode::kDataLoss,
                  "tensor 'w': data_offsets [0, 24] leave the data buffer of 20 bytes"},
        Malformed{"not JSON", "{\"w\": [", 0, -1, absl::StatusCode::kDataLoss, "not valid JSON"},
        Malformed{"not an object", "[1, 2]", 0, -1, absl::StatusCode::kDataLoss,
                  "not a JSON object"},
        Malformed{"unsupported dtype", R"({"w":{"dtype":"I64","shape":[3],"data_offsets":[0,24]}})",
                  24, -1, absl::StatusCode::kInvalidArgument, "tensor 'w' has dtype I64"},
        Malformed{"unknown dtype", R"({"w":{"dtype":"Q4","shape":[3],"data_offsets":[0,6]}})", 6,
                  -1, absl::StatusCode::kInvalidArgument, "Q4 (not a safetensors dtype)"},
        Malformed{"size mismatch", R"({"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,24]}})",
                  24, -1, absl::StatusCode::kDataLoss,
                  "tensor 'w': shape [2, 3] of BF16 needs 12 bytes but data_offsets give 24"},
        Malformed{"overlap",
                  R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                  16, -1, absl::StatusCode::kDataLoss, "'a' [0, 16) and 'b' [8, 16) overlap"},
        Malformed{"missing field", R"({"w":{"dtype":"F32","shape":[2]}})", 8, -1,
                  absl::StatusCode::kDataLoss, "tensor 'w': no 'data_offsets' field"},
        Malformed{"unknown field",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4, -1,
                  absl::StatusCode::kDataLoss, "tensor 'w': unknown field 'x'"},
        Malformed{"negative size", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8,
                  -1, absl::StatusCode::kDataLoss, "non-negative integers, got -2"},
        Malformed{"fractional size", R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})",
                  8, -1, absl::StatusCode::kDataLoss, "non-negative integers, got 2.5"},
        Malformed{"shape not an array",
                  R"({"w":{"dtype":"F32","shape":"[2]","data_offsets":[0,8]}})", 8, -1,
                  absl::StatusCode::kDataLoss, "tensor 'w': 'shape' is not an array"},
        Malformed{"huge offset",
                  R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", 8,
                  -1, absl::StatusCode::kDataLoss, "is too large"},
        Malformed{"reversed offsets", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})",
                  8, -1, absl::StatusCode::kDataLoss, "data_offsets [8, 0]"},
        Malformed{"metadata not strings", R"({"__metadata__":{"step":3}})", 0, -1,
                  absl::StatusCode::kDataLoss, "'__metadata__' entry 'step' is not a string"},
        Malformed{"entry not an object", R"({"w":[1]})", 0, -1, absl::StatusCode::kDataLoss,
                  "tensor 'w': its entry is not a JSON object"},
        Malformed{"tensor twice",
                  R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  8, -1, absl::StatusCode::kDataLoss, "tensor 'w' appears twice in the header"},
        Malformed{"field twice",
                  R"({"w":{"dtype":"F32","shape":[1],"shape":[2],"data_offsets":[0,4]}})", 4, -1,
                  absl::StatusCode::kDataLoss, "field 'shape' appears twice in one entry"}),
    [](const ::testing::TestParamInfo<Malformed>& info) {
      std::string name = info.param.what;
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

TEST(Safetensors, TooShortForTheLength) {
  const std::string path = freshDir() + "/short.safetensors";
  std::ofstream(path) << "abc";
  EXPECT_THAT(SafetensorsFile::open(path).status(),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr(path), HasSubstr("3 bytes"))));
  EXPECT_THAT(SafetensorsFile::open(path + ".none").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(".none")));
}

TEST(Safetensors, TruncatedAfterOpenAndBadBoxes) {
  const std::string path = freshDir() + "/model.safetensors";
  ASSERT_TRUE(writeSafetensors(path, {{{"w", StDType::kF32, {4, 4}}, iota(16)}}).ok());
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok());
  std::vector<float> v(4);
  EXPECT_THAT(file->readBox("w", {{3, 0}, {2, 2}}, v),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor 'w'")));
  EXPECT_THAT(file->readBox("w", {{0, 0}, {1, 3}}, v),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("buffer holds 4")));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 8);
  EXPECT_THAT(file->readBox("w", {{3, 0}, {1, 4}}, v),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("tensor 'w'"), HasSubstr(path), HasSubstr("truncated"))));
}

TEST(Safetensors, WritersShareOneFile) {
  // Two writers (as two ranks) fill disjoint boxes of one tensor.
  const std::string path = freshDir() + "/model.safetensors";
  absl::StatusOr<FileLayout> layout = layoutFile({{"w", StDType::kF16, {2, 4}}}, {});
  ASSERT_TRUE(layout.ok());
  absl::StatusOr<SafetensorsWriter> first = SafetensorsWriter::create(path, *layout);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<SafetensorsWriter> second = SafetensorsWriter::join(path, *layout);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(first->writeBox("w", {{0, 0}, {2, 2}}, std::vector<float>{1, 2, 5, 6}).ok());
  ASSERT_TRUE(second->writeBox("w", {{0, 2}, {2, 2}}, std::vector<float>{3, 4, 7, 8}).ok());
  EXPECT_THAT(second->writeBox("v", {{0}, {1}}, std::vector<float>{1}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("'v'")));
  ASSERT_TRUE(second->finish().ok());
  ASSERT_TRUE(first->commit().ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<float> all(8);
  ASSERT_TRUE(file->readBox("w", {{0, 0}, {2, 4}}, all).ok());
  EXPECT_THAT(all, ElementsAreArray(iota(8, 1)));
}

TEST(Safetensors, LayoutRefusesBadNames) {
  EXPECT_THAT(layoutFile({{"w", StDType::kF32, {1}}, {"w", StDType::kF32, {1}}}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'w'")));
  EXPECT_THAT(layoutFile({{"__metadata__", StDType::kF32, {1}}}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("__metadata__")));
}

}  // namespace
}  // namespace loom::runtime::hf
