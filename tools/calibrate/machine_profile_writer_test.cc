// Tests of the machine profile writer: the shape-class rule, the JSON
// fields (round trip through nlohmann::json), the file write and every
// validation error.
#include "tools/calibrate/machine_profile_writer.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/status_matchers.h"

namespace loom::calibrate {
namespace {

using ::loom::testutil::StatusIs;
using ::nlohmann::json;
using ::testing::HasSubstr;

MachineProfile sample() {
  MachineProfile p;
  p.name = "cpu_2core";
  p.measured_on = "host/Intel(R) Xeon(R) Processor (2 cores)";
  p.date = "2026-11-30";
  p.device = {
      .name = "cpu", .memory_bytes = int64_t{16} << 30, .memory_bandwidth_bytes_per_s = 9.5e9};
  p.gemm = {{"f32", "small", 128, 128, 128, 4.5e10},
            {"f32", "medium", 1024, 512, 300, 8.0e10},
            {"f32", "large", 2048, 2048, 4096, 9.0e10}};
  p.collectives = {{.backend = "gloo",
                    .kind = "all_reduce",
                    .group_size = 2,
                    .link_class = "intra_host",
                    .latency_s = 1.25e-4,
                    .bus_bandwidth_bytes_per_s = 1.5e9,
                    .points = {{4096, 1.3e-4}, {1 << 20, 8e-4}}},
                   {.backend = "gloo",
                    .kind = "all_gather",
                    .group_size = 4,
                    .link_class = "intra_host",
                    .latency_s = 0,
                    .bus_bandwidth_bytes_per_s = 7.5e8,
                    .points = {{4096, 2e-4}}}};
  return p;
}

TEST(ShapeClassTest, ByTheSmallestDimension) {
  EXPECT_EQ(shapeClass(1, 4096, 4096), "small");
  EXPECT_EQ(shapeClass(255, 8192, 8192), "small");
  EXPECT_EQ(shapeClass(256, 256, 256), "medium");
  EXPECT_EQ(shapeClass(8192, 2047, 8192), "medium");
  EXPECT_EQ(shapeClass(2048, 2048, 2048), "large");
  EXPECT_EQ(shapeClass(16384, 4096, 2048), "large");
}

TEST(MachineProfileWriterTest, JsonCarriesEveryField) {
  const MachineProfile p = sample();
  // Through text and back, as a reader gets it.
  const json j = json::parse(profileToJson(p).dump());
  EXPECT_EQ(j.at("format"), "loom.machine_profile");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("name"), p.name);
  EXPECT_EQ(j.at("measured_on"), p.measured_on);
  EXPECT_EQ(j.at("date"), p.date);
  EXPECT_EQ(j.at("device").at("name"), "cpu");
  EXPECT_EQ(j.at("device").at("memory_bytes").get<int64_t>(), p.device.memory_bytes);
  EXPECT_EQ(j.at("device").at("memory_bandwidth_bytes_per_s").get<double>(), 9.5e9);
  ASSERT_EQ(j.at("gemm").size(), 3u);
  for (size_t i = 0; i < p.gemm.size(); ++i) {
    const json& g = j.at("gemm")[i];
    EXPECT_EQ(g.size(), 6u);
    EXPECT_EQ(g.at("dtype"), p.gemm[i].dtype);
    EXPECT_EQ(g.at("shape_class"), p.gemm[i].shape_class);
    EXPECT_EQ(g.at("m").get<int64_t>(), p.gemm[i].m);
    EXPECT_EQ(g.at("n").get<int64_t>(), p.gemm[i].n);
    EXPECT_EQ(g.at("k").get<int64_t>(), p.gemm[i].k);
    EXPECT_EQ(g.at("flops_per_s").get<double>(), p.gemm[i].flops_per_s);
  }
  ASSERT_EQ(j.at("collectives").size(), 2u);
  for (size_t i = 0; i < p.collectives.size(); ++i) {
    const json& c = j.at("collectives")[i];
    const ProfileCollective& want = p.collectives[i];
    EXPECT_EQ(c.size(), 7u);
    EXPECT_EQ(c.at("backend"), want.backend);
    EXPECT_EQ(c.at("kind"), want.kind);
    EXPECT_EQ(c.at("group_size").get<int>(), want.group_size);
    EXPECT_EQ(c.at("link_class"), want.link_class);
    EXPECT_EQ(c.at("latency_s").get<double>(), want.latency_s);
    EXPECT_EQ(c.at("bus_bandwidth_bytes_per_s").get<double>(), want.bus_bandwidth_bytes_per_s);
    ASSERT_EQ(c.at("points").size(), want.points.size());
    for (size_t k = 0; k < want.points.size(); ++k) {
      EXPECT_EQ(c.at("points")[k].at("bytes").get<int64_t>(), want.points[k].bytes);
      EXPECT_EQ(c.at("points")[k].at("time_s").get<double>(), want.points[k].time_s);
    }
  }
  EXPECT_EQ(j.size(), 8u);  // no field beyond the schema's
}

TEST(MachineProfileWriterTest, WritesTheFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/profile.json";
  ASSERT_TRUE(writeProfile(sample(), path).ok());
  std::ifstream in(path);
  const json j = json::parse(in);
  EXPECT_EQ(j, profileToJson(sample()));
}

TEST(MachineProfileWriterTest, RefusesAnInvalidProfileWithoutWriting) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/invalid.json";
  MachineProfile p = sample();
  p.gemm[0].shape_class = "medium";
  EXPECT_THAT(writeProfile(p, path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("gemm[0]: shape_class 'medium' but 128x128x128 is small")));
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST(MachineProfileWriterTest, ValidationNamesTheField) {
  struct Case {
    void (*mutate)(MachineProfile&);
    const char* message;
  };
  const Case cases[] = {
      {[](MachineProfile& p) { p.name.clear(); }, "name: is empty"},
      {[](MachineProfile& p) { p.date = "30/11/2026"; }, "date: '30/11/2026' is not YYYY-MM-DD"},
      {[](MachineProfile& p) { p.device.memory_bytes = 0; }, "device.memory_bytes: 0"},
      {[](MachineProfile& p) { p.device.memory_bandwidth_bytes_per_s = -1; },
       "device.memory_bandwidth_bytes_per_s"},
      {[](MachineProfile& p) { p.gemm.clear(); }, "gemm: has no entry"},
      {[](MachineProfile& p) { p.gemm[1].dtype = "f64"; }, "gemm[1]: dtype 'f64'"},
      {[](MachineProfile& p) { p.gemm[2].flops_per_s = 0; }, "gemm[2]: flops_per_s 0"},
      {[](MachineProfile& p) { p.gemm.push_back(p.gemm[0]); }, "gemm[3]: duplicates f32"},
      {[](MachineProfile& p) { p.collectives[0].backend = "ucx"; },
       "collectives[0]: backend 'ucx'"},
      {[](MachineProfile& p) { p.collectives[1].kind = "all_to_all"; },
       "collectives[1]: kind 'all_to_all'"},
      {[](MachineProfile& p) { p.collectives[0].group_size = 1; }, "group_size 1 must be >= 2"},
      {[](MachineProfile& p) { p.collectives[0].link_class = "nvlink"; }, "link_class 'nvlink'"},
      {[](MachineProfile& p) { p.collectives[0].latency_s = -1e-6; }, "latency_s -1e-06"},
      {[](MachineProfile& p) { p.collectives[0].bus_bandwidth_bytes_per_s = 0; },
       "bus_bandwidth_bytes_per_s 0"},
      {[](MachineProfile& p) { p.collectives[0].points.clear(); }, "has no measured points"},
      {[](MachineProfile& p) { p.collectives[0].points[1].time_s = 0; },
       "collectives[0].points[1]"},
      {[](MachineProfile& p) { p.collectives[1] = p.collectives[0]; },
       "collectives[1]: duplicates gloo all_reduce over 2 ranks intra_host"},
  };
  ASSERT_TRUE(validateProfile(sample()).ok());
  for (const Case& c : cases) {
    MachineProfile p = sample();
    c.mutate(p);
    EXPECT_THAT(validateProfile(p),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

}  // namespace
}  // namespace loom::calibrate
