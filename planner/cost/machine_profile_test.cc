// Tests of the machine profile reader: a valid profile, every kind of
// field error (named by its JSON path), shape classes and the lookups.
#include "planner/cost/machine_profile.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::cost {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

constexpr char kProfile[] = R"({
  "format": "loom.machine_profile", "version": 1, "name": "lab-h200",
  "measured_on": "node7/H200", "date": "2026-11-30",
  "device": {"name": "h200", "memory_bytes": 151397597184, "memory_bandwidth_bytes_per_s": 4.1e12},
  "gemm": [
    {"dtype": "bf16", "shape_class": "large", "m": 8192, "n": 8192, "k": 8192, "flops_per_s": 7.0e14},
    {"dtype": "bf16", "shape_class": "large", "m": 4096, "n": 2048, "k": 2048, "flops_per_s": 6.0e14},
    {"dtype": "bf16", "shape_class": "medium", "m": 1024, "n": 1024, "k": 1024, "flops_per_s": 4.0e14},
    {"dtype": "f32", "shape_class": "small", "m": 128, "n": 128, "k": 128, "flops_per_s": 1.0e12}
  ],
  "collectives": [
    {"backend": "nccl", "kind": "all_reduce", "group_size": 8, "link_class": "intra_host",
     "latency_s": 2e-5, "bus_bandwidth_bytes_per_s": 3.6e11,
     "points": [{"bytes": 1048576, "time_s": 2.5e-5}]},
    {"backend": "nccl", "kind": "all_gather", "group_size": 2, "link_class": "intra_host",
     "latency_s": 1e-5, "bus_bandwidth_bytes_per_s": 3.0e11},
    {"backend": "nccl", "kind": "all_gather", "group_size": 8, "link_class": "intra_host",
     "latency_s": 3e-5, "bus_bandwidth_bytes_per_s": 3.5e11},
    {"backend": "gloo", "kind": "all_gather", "group_size": 4, "link_class": "intra_host",
     "latency_s": 1e-4, "bus_bandwidth_bytes_per_s": 2.0e9}
  ]
})";

TEST(MachineProfileTest, ParsesEveryField) {
  absl::StatusOr<MachineProfile> profile = parseMachineProfile(kProfile, "p.json");
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->name, "lab-h200");
  EXPECT_EQ(profile->measured_on, "node7/H200");
  EXPECT_EQ(profile->date, "2026-11-30");
  EXPECT_EQ(profile->device_name, "h200");
  EXPECT_EQ(profile->memory_bytes, 151397597184);
  EXPECT_DOUBLE_EQ(profile->memory_bandwidth_bytes_per_s, 4.1e12);
  ASSERT_EQ(profile->gemm.size(), 4u);
  EXPECT_EQ(profile->gemm[2].shape_class, ShapeClass::kMedium);
  ASSERT_EQ(profile->collectives.size(), 4u);
  EXPECT_EQ(profile->collectives[0].link_class, LinkScope::kIntraHost);
  ASSERT_EQ(profile->collectives[0].points.size(), 1u);
  EXPECT_EQ(profile->collectives[0].points[0].bytes, 1048576);
  EXPECT_TRUE(profile->collectives[1].points.empty());
}

TEST(MachineProfileTest, ShapeClassesFollowTheSmallestDim) {
  EXPECT_EQ(shapeClassOf(8192, 8192, 255), ShapeClass::kSmall);
  EXPECT_EQ(shapeClassOf(256, 8192, 8192), ShapeClass::kMedium);
  EXPECT_EQ(shapeClassOf(8192, 2047, 8192), ShapeClass::kMedium);
  EXPECT_EQ(shapeClassOf(2048, 2048, 2048), ShapeClass::kLarge);
}

TEST(MachineProfileTest, GemmLookupTakesTheNearestShapeOfTheClass) {
  const MachineProfile profile = *parseMachineProfile(kProfile, "p.json");
  // 8192^3 is nearer 8192^3 than 4096x2048x2048.
  EXPECT_DOUBLE_EQ(profile.gemmFor("bf16", 8192, 8192, 8192)->flops_per_s, 7.0e14);
  EXPECT_DOUBLE_EQ(profile.gemmFor("bf16", 4096, 2048, 4096)->flops_per_s, 6.0e14);
  EXPECT_DOUBLE_EQ(profile.gemmFor("bf16", 512, 4096, 4096)->flops_per_s, 4.0e14);
  EXPECT_EQ(profile.gemmFor("bf16", 64, 64, 64), nullptr);  // no small bf16 entry
  EXPECT_EQ(profile.gemmFor("f16", 8192, 8192, 8192), nullptr);
}

TEST(MachineProfileTest, CollectiveLookupPrefersTheBackendThenTheNearestSize) {
  const MachineProfile profile = *parseMachineProfile(kProfile, "p.json");
  // log2 distance: 4 is 1 from 2 and 1 from 8: the larger wins.
  EXPECT_EQ(profile.collectiveFor("all_gather", LinkScope::kIntraHost, 4, "nccl")->group_size, 8);
  EXPECT_EQ(profile.collectiveFor("all_gather", LinkScope::kIntraHost, 3, "nccl")->group_size, 2);
  EXPECT_EQ(profile.collectiveFor("all_gather", LinkScope::kIntraHost, 64, "nccl")->group_size, 8);
  // A backend the profile has: only its entries.
  EXPECT_EQ(profile.collectiveFor("all_gather", LinkScope::kIntraHost, 8, "gloo")->group_size, 4);
  // A backend it lacks: any backend.
  EXPECT_EQ(profile.collectiveFor("all_gather", LinkScope::kIntraHost, 8, "mpi")->backend, "nccl");
  EXPECT_EQ(profile.collectiveFor("all_gather", LinkScope::kInterHost, 8, "nccl"), nullptr);
  EXPECT_EQ(profile.collectiveFor("reduce_scatter", LinkScope::kIntraHost, 8, "nccl"), nullptr);
}

absl::Status parseEdited(const std::string& from, const std::string& to) {
  std::string text = kProfile;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  return parseMachineProfile(text, "p.json").status();
}

TEST(MachineProfileTest, ErrorsNameTheField) {
  EXPECT_THAT(parseMachineProfile("{", "p.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("machine profile p.json: (file): not valid JSON")));
  EXPECT_THAT(parseEdited("\"loom.machine_profile\"", "\"other\""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("format: expected \"loom.machine_profile\", got \"other\"")));
  EXPECT_THAT(parseEdited("\"version\": 1", "\"version\": 2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("version: this reader knows version 1, got 2")));
  EXPECT_THAT(parseEdited("\"name\": \"lab-h200\",", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("p.json: name: missing")));
  EXPECT_THAT(parseEdited("\"memory_bytes\": 151397597184", "\"memory_bytes\": \"lots\""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("device.memory_bytes: expected an integer >= 1, got \"lots\"")));
  EXPECT_THAT(parseEdited("\"m\": 8192", "\"m\": -4"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gemm[0].m: expected an integer >= 1, got -4")));
  EXPECT_THAT(parseEdited("\"dtype\": \"f32\"", "\"dtype\": \"f64\""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gemm[3].dtype: expected one of f32, bf16, f16, got \"f64\"")));
  EXPECT_THAT(parseEdited("\"shape_class\": \"medium\"", "\"shape_class\": \"large\""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gemm[2].shape_class: \"large\" disagrees with m, n, k = 1024, "
                                 "1024, 1024: min(m, n, k) = 1024 is \"medium\"")));
  EXPECT_THAT(parseEdited("\"flops_per_s\": 7.0e14", "\"flops_per_s\": 0"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gemm[0].flops_per_s: expected a finite number > 0, got 0")));
  EXPECT_THAT(parseEdited("\"link_class\": \"intra_host\",\n     \"latency_s\": 2e-5",
                          "\"link_class\": \"nvlink\",\n     \"latency_s\": 2e-5"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("collectives[0].link_class: expected one of intra_host, "
                                 "inter_host, got \"nvlink\"")));
  EXPECT_THAT(
      parseEdited("\"group_size\": 8, \"link_class\": \"intra_host\",\n     \"latency_s\": 2e-5",
                  "\"group_size\": 1, \"link_class\": \"intra_host\",\n     \"latency_s\": 2e-5"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("collectives[0].group_size: expected an integer >= 2, got 1")));
  EXPECT_THAT(parseEdited("\"latency_s\": 2e-5", "\"latency_s\": -1"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("collectives[0].latency_s: expected a finite number >= 0")));
  EXPECT_THAT(parseEdited("{\"bytes\": 1048576, \"time_s\": 2.5e-5}", "{\"bytes\": 1048576}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("collectives[0].points[0].time_s: missing")));
  EXPECT_THAT(parseEdited("\"backend\": \"gloo\"", "\"backend\": \"ucc\""),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("collectives[3].backend: expected one of gloo, mpi, nccl")));
}

TEST(MachineProfileTest, LoadsFromAFileAndNamesAMissingOne) {
  const std::string path = std::string(testing::TempDir()) + "/profile.json";
  std::ofstream(path) << kProfile;
  absl::StatusOr<MachineProfile> profile = loadMachineProfile(path);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->gemm.size(), 4u);
  EXPECT_THAT(loadMachineProfile(path + ".nope").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("cannot read machine profile '" + path + ".nope'")));
}

}  // namespace
}  // namespace loom::planner::cost
