// Tests for DeviceMesh: construction and validation, rank <-> coordinate,
// groups along axes, slicing, sub-meshes, flattening and spec parsing,
// including every error path.

#include "mesh/device_mesh.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::mesh {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Groups = std::vector<DeviceMesh::Group>;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kNotFound = absl::StatusCode::kNotFound;

DeviceMesh mesh2x4() { return DeviceMesh::create({2, 4}, {"dp", "tp"}).value(); }

DeviceMesh mesh2x2x2() { return DeviceMesh::create({2, 2, 2}, {"pp", "dp", "tp"}).value(); }

TEST(DeviceMeshTest, CreateLaysOutRanksRowMajor) {
  DeviceMesh mesh = mesh2x4();
  EXPECT_EQ(mesh.ndim(), 2);
  EXPECT_EQ(mesh.size(), 8);
  EXPECT_THAT(mesh.shape(), ElementsAre(2, 4));
  EXPECT_THAT(mesh.axisNames(), ElementsAre("dp", "tp"));
  EXPECT_THAT(mesh.ranks(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(mesh.axisIndex("tp").value(), 1);
  EXPECT_EQ(mesh.axisSize("dp").value(), 2);
  EXPECT_TRUE(mesh.hasAxis("dp"));
  EXPECT_FALSE(mesh.hasAxis("pp"));
  EXPECT_TRUE(mesh.contains(7));
  EXPECT_FALSE(mesh.contains(8));
  EXPECT_EQ(mesh.toString(), "mesh<dp=2, tp=4>");
}

TEST(DeviceMeshTest, GroupsOfTheIssueExample) {
  DeviceMesh mesh = mesh2x4();
  EXPECT_EQ(mesh.groups({"tp"}).value(), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(mesh.groups({"dp"}).value(), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(mesh.groups({"dp", "tp"}).value(), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(mesh.groups({}).value(), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
}

TEST(DeviceMeshTest, GroupRankOrderFollowsTheListedAxisOrder) {
  EXPECT_EQ(mesh2x4().groups({"tp", "dp"}).value(), (Groups{{0, 4, 1, 5, 2, 6, 3, 7}}));
}

TEST(DeviceMeshTest, GroupOfFindsTheGroupContainingARank) {
  DeviceMesh mesh = mesh2x4();
  EXPECT_THAT(mesh.groupOf(6, {"tp"}).value(), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(mesh.groupOf(6, {"dp"}).value(), ElementsAre(2, 6));
  EXPECT_THAT(mesh.groupOf(6, {}).value(), ElementsAre(6));
  EXPECT_THAT(mesh.groupOf(6, {"tp", "dp"}).value(), ElementsAre(0, 4, 1, 5, 2, 6, 3, 7));
}

TEST(DeviceMeshTest, ThreeDimensionalGroups) {
  DeviceMesh mesh = mesh2x2x2();
  EXPECT_EQ(mesh.groups({"tp"}).value(), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(mesh.groups({"dp"}).value(), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(mesh.groups({"pp"}).value(), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Axes 0 and 2: the groups are ordered by the remaining axis, dp.
  EXPECT_EQ(mesh.groups({"pp", "tp"}).value(), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(mesh.groups({"tp", "pp"}).value(), (Groups{{0, 4, 1, 5}, {2, 6, 3, 7}}));
  EXPECT_THAT(mesh.groupOf(7, {"pp", "tp"}).value(), ElementsAre(2, 3, 6, 7));
}

TEST(DeviceMeshTest, GroupsPartitionTheMesh) {
  DeviceMesh mesh = DeviceMesh::create({3, 2, 4}, {"a", "b", "c"}).value();
  for (const std::vector<std::string>& axes :
       std::vector<std::vector<std::string>>{{"a"}, {"b"}, {"c"}, {"a", "c"}, {"c", "b"}}) {
    Groups groups = mesh.groups(axes).value();
    std::vector<int> seen(mesh.size(), 0);
    for (const DeviceMesh::Group& group : groups) {
      for (int64_t rank : group) {
        ++seen[rank];
        EXPECT_EQ(mesh.groupOf(rank, axes).value(), group);
      }
    }
    EXPECT_THAT(seen, testing::Each(1));
  }
}

TEST(DeviceMeshTest, RankAndCoordinateRoundTrip) {
  DeviceMesh mesh = DeviceMesh::create({3, 2, 4}, {"a", "b", "c"}).value();
  for (int64_t rank = 0; rank < mesh.size(); ++rank) {
    std::vector<int64_t> coordinate = mesh.coordinateOf(rank).value();
    EXPECT_EQ(mesh.rankAt(coordinate).value(), rank);
  }
  EXPECT_THAT(mesh.coordinateOf(13).value(), ElementsAre(1, 1, 1));
  EXPECT_EQ(mesh.rankAt({2, 1, 3}).value(), 23);
}

TEST(DeviceMeshTest, ExplicitRanks) {
  DeviceMesh mesh = DeviceMesh::createWithRanks({2, 2}, {"dp", "tp"}, {3, 1, 2, 0}).value();
  EXPECT_THAT(mesh.ranks(), ElementsAre(3, 1, 2, 0));
  EXPECT_THAT(mesh.coordinateOf(2).value(), ElementsAre(1, 0));
  EXPECT_EQ(mesh.rankAt({0, 1}).value(), 1);
  EXPECT_EQ(mesh.groups({"tp"}).value(), (Groups{{3, 1}, {2, 0}}));
  EXPECT_EQ(mesh.groups({"dp"}).value(), (Groups{{3, 2}, {1, 0}}));
  EXPECT_EQ(mesh.toString(), "mesh<dp=2, tp=2>[3, 1, 2, 0]");
  for (int64_t rank : mesh.ranks()) {
    EXPECT_EQ(mesh.rankAt(mesh.coordinateOf(rank).value()).value(), rank);
  }
}

TEST(DeviceMeshTest, ExplicitRanksNeedNotStartAtZero) {
  DeviceMesh mesh = DeviceMesh::createWithRanks({2}, {"tp"}, {10, 42}).value();
  EXPECT_THAT(mesh.coordinateOf(42).value(), ElementsAre(1));
  EXPECT_FALSE(mesh.contains(0));
}

TEST(DeviceMeshTest, ZeroDimensionalMeshHoldsOneRank) {
  DeviceMesh mesh = DeviceMesh::create({}, {}).value();
  EXPECT_EQ(mesh.ndim(), 0);
  EXPECT_EQ(mesh.size(), 1);
  EXPECT_TRUE(mesh.coordinateOf(0).value().empty());
  EXPECT_EQ(mesh.rankAt({}).value(), 0);
  EXPECT_EQ(mesh.groups({}).value(), (Groups{{0}}));
  EXPECT_EQ(mesh.toString(), "mesh<>");
}

TEST(DeviceMeshTest, EqualityComparesShapeNamesAndRanks) {
  EXPECT_EQ(mesh2x4(), mesh2x4());
  EXPECT_NE(mesh2x4(), DeviceMesh::create({4, 2}, {"dp", "tp"}).value());
  EXPECT_NE(mesh2x4(), DeviceMesh::create({2, 4}, {"dp", "sp"}).value());
  EXPECT_NE(mesh2x4(),
            DeviceMesh::createWithRanks({2, 4}, {"dp", "tp"}, {0, 1, 2, 3, 4, 5, 7, 6}).value());
  std::ostringstream stream;
  stream << mesh2x4();
  EXPECT_EQ(stream.str(), "mesh<dp=2, tp=4>");
}

TEST(DeviceMeshTest, ToStringElidesLongRankLists) {
  std::vector<int64_t> ranks;
  for (int64_t r = 0; r < 32; ++r) ranks.push_back(31 - r);
  DeviceMesh mesh = DeviceMesh::createWithRanks({32}, {"dp"}, ranks).value();
  EXPECT_EQ(mesh.toString(), "mesh<dp=32>[31, 30, 29, 28, 27, 26, 25, 24, ... (32 ranks)]");
}

TEST(DeviceMeshTest, CreateRejectsNameCountMismatch) {
  EXPECT_THAT(
      DeviceMesh::create({2, 4}, {"dp", "tp", "pp"}).status(),
      StatusIs(kInvalid, AllOf(HasSubstr("2x4"), HasSubstr("2 axes"),
                               HasSubstr("names were given for 3"), HasSubstr("(dp, tp, pp)"))));
}

TEST(DeviceMeshTest, CreateRejectsNonPositiveSizes) {
  EXPECT_THAT(DeviceMesh::create({2, 0}, {"dp", "tp"}).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'tp'"), HasSubstr("size 0"))));
  EXPECT_THAT(DeviceMesh::create({-3, 2}, {"dp", "tp"}).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'dp'"), HasSubstr("size -3"))));
}

TEST(DeviceMeshTest, CreateRejectsHugeMeshes) {
  EXPECT_THAT(DeviceMesh::create({1 << 20, 1 << 20}, {"a", "b"}).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("1048576x1048576"),
                                       HasSubstr("more than 16777216 devices"))));
}

TEST(DeviceMeshTest, CreateRejectsDuplicateNames) {
  EXPECT_THAT(
      DeviceMesh::create({2, 4}, {"dp", "dp"}).status(),
      StatusIs(kInvalid, AllOf(HasSubstr("'dp'"), HasSubstr("axes 0 and 1"), HasSubstr("unique"))));
}

TEST(DeviceMeshTest, CreateRejectsNamesThatAreNotIdentifiers) {
  for (const char* name : {"", "2d", "d-p", "d p", "dp="}) {
    EXPECT_THAT(DeviceMesh::create({2}, {name}).status(),
                StatusIs(kInvalid, AllOf(HasSubstr(std::string("'") + name + "'"),
                                         HasSubstr("not an identifier"))))
        << name;
  }
  EXPECT_TRUE(DeviceMesh::create({2}, {"_dp2"}).ok());
}

TEST(DeviceMeshTest, CreateWithRanksRejectsBadRankArrays) {
  EXPECT_THAT(DeviceMesh::createWithRanks({2, 2}, {"dp", "tp"}, {0, 1, 2}).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("4 devices"), HasSubstr("3 ranks"))));
  EXPECT_THAT(DeviceMesh::createWithRanks({2, 2}, {"dp", "tp"}, {0, 1, -1, 2}).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("rank -1"), HasSubstr("index 2"),
                                       HasSubstr("non-negative"))));
  EXPECT_THAT(DeviceMesh::createWithRanks({2, 2}, {"dp", "tp"}, {5, 1, 2, 5}).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("rank 5"), HasSubstr("indices 0 and 3"))));
  EXPECT_THAT(DeviceMesh::createWithRanks({2, 0}, {"dp", "tp"}, {}).status(),
              StatusIs(kInvalid, HasSubstr("size 0")));
}

TEST(DeviceMeshTest, UnknownAxisIsNotFound) {
  DeviceMesh mesh = mesh2x4();
  auto unknown_pp = StatusIs(
      kNotFound,
      AllOf(HasSubstr("no axis 'pp'"), HasSubstr("mesh<dp=2, tp=4>"), HasSubstr("(dp, tp)")));
  EXPECT_THAT(mesh.axisIndex("pp").status(), unknown_pp);
  EXPECT_THAT(mesh.axisSize("pp").status(), unknown_pp);
  EXPECT_THAT(mesh.groups({"tp", "pp"}).status(), unknown_pp);
  EXPECT_THAT(mesh.groupOf(0, {"pp"}).status(), unknown_pp);
  EXPECT_THAT(mesh.slice("pp", 0).status(), unknown_pp);
  EXPECT_THAT(mesh.subMesh(0, {"pp"}).status(), unknown_pp);
  EXPECT_THAT(mesh.flatten({"pp"}, "x").status(), unknown_pp);
}

TEST(DeviceMeshTest, RepeatedAxisIsRejected) {
  EXPECT_THAT(mesh2x4().groups({"tp", "tp"}).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'tp' is listed twice"), HasSubstr("(tp, tp)"))));
}

TEST(DeviceMeshTest, RanksOutsideTheMeshAreRejected) {
  DeviceMesh mesh = mesh2x4();
  auto not_in_mesh = [](int64_t rank) {
    return StatusIs(kInvalid, AllOf(HasSubstr("rank " + std::to_string(rank) + " is not in"),
                                    HasSubstr("mesh<dp=2, tp=4>")));
  };
  EXPECT_THAT(mesh.coordinateOf(8).status(), not_in_mesh(8));
  EXPECT_THAT(mesh.coordinateOf(-1).status(), not_in_mesh(-1));
  EXPECT_THAT(mesh.groupOf(9, {"tp"}).status(), not_in_mesh(9));
  EXPECT_THAT(mesh.subMesh(9, {"tp"}).status(), not_in_mesh(9));
  DeviceMesh tp = mesh.slice("dp", 1).value();
  EXPECT_THAT(tp.coordinateOf(0).status(),
              StatusIs(kInvalid, HasSubstr("rank 0 is not in mesh<tp=4>[4, 5, 6, 7]")));
}

TEST(DeviceMeshTest, RankAtRejectsBadCoordinates) {
  DeviceMesh mesh = mesh2x4();
  EXPECT_THAT(
      mesh.rankAt({1}).status(),
      StatusIs(kInvalid, AllOf(HasSubstr("(1)"), HasSubstr("1 entries"), HasSubstr("2 axes"))));
  EXPECT_THAT(
      mesh.rankAt({1, 4}).status(),
      StatusIs(kInvalid, AllOf(HasSubstr("coordinate 4"), HasSubstr("'tp'"), HasSubstr("[0, 4)"))));
  EXPECT_THAT(mesh.rankAt({-1, 0}).status(),
              StatusIs(kInvalid,
                       AllOf(HasSubstr("coordinate -1"), HasSubstr("'dp'"), HasSubstr("[0, 2)"))));
}

TEST(DeviceMeshTest, SliceRemovesTheAxisAndKeepsRanks) {
  DeviceMesh mesh = mesh2x4();
  DeviceMesh tp = mesh.slice("dp", 1).value();
  EXPECT_EQ(tp, DeviceMesh::createWithRanks({4}, {"tp"}, {4, 5, 6, 7}).value());
  EXPECT_EQ(tp.toString(), "mesh<tp=4>[4, 5, 6, 7]");
  DeviceMesh dp = mesh.slice("tp", 2).value();
  EXPECT_EQ(dp, DeviceMesh::createWithRanks({2}, {"dp"}, {2, 6}).value());
  DeviceMesh single = dp.slice("dp", 1).value();
  EXPECT_EQ(single.ndim(), 0);
  EXPECT_THAT(single.ranks(), ElementsAre(6));

  DeviceMesh cube = mesh2x2x2();
  EXPECT_EQ(cube.slice("dp", 1).value(),
            DeviceMesh::createWithRanks({2, 2}, {"pp", "tp"}, {2, 3, 6, 7}).value());
}

TEST(DeviceMeshTest, SliceRejectsOutOfRangeIndex) {
  EXPECT_THAT(mesh2x4().slice("dp", 2).status(),
              StatusIs(kInvalid,
                       AllOf(HasSubstr("slice index 2"), HasSubstr("'dp'"), HasSubstr("[0, 2)"))));
  EXPECT_THAT(mesh2x4().slice("tp", -1).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("slice index -1"), HasSubstr("[0, 4)"))));
}

TEST(DeviceMeshTest, SubMeshIsSpannedByTheListedAxes) {
  DeviceMesh cube = mesh2x2x2();
  EXPECT_EQ(cube.subMesh(5, {"tp"}).value(),
            DeviceMesh::createWithRanks({2}, {"tp"}, {4, 5}).value());
  EXPECT_EQ(cube.subMesh(5, {"pp", "tp"}).value(),
            DeviceMesh::createWithRanks({2, 2}, {"pp", "tp"}, {0, 1, 4, 5}).value());
  EXPECT_EQ(cube.subMesh(5, {"tp", "pp"}).value(),
            DeviceMesh::createWithRanks({2, 2}, {"tp", "pp"}, {0, 4, 1, 5}).value());
  EXPECT_EQ(cube.subMesh(5, {"pp", "dp", "tp"}).value(), cube);
  EXPECT_THAT(cube.subMesh(5, {}).value().ranks(), ElementsAre(5));
  // Sub-meshes of sub-meshes keep the original ranks.
  DeviceMesh tp = cube.subMesh(6, {"dp", "tp"}).value().subMesh(6, {"tp"}).value();
  EXPECT_THAT(tp.ranks(), ElementsAre(6, 7));
}

TEST(DeviceMeshTest, FlattenMergesAdjacentAxes) {
  DeviceMesh cube = mesh2x2x2();
  DeviceMesh merged = cube.flatten({"dp", "tp"}, "dp_tp").value();
  EXPECT_THAT(merged.shape(), ElementsAre(2, 4));
  EXPECT_THAT(merged.axisNames(), ElementsAre("pp", "dp_tp"));
  EXPECT_EQ(merged.ranks(), cube.ranks());
  EXPECT_EQ(merged.groups({"dp_tp"}).value(), cube.groups({"dp", "tp"}).value());

  DeviceMesh front = cube.flatten({"pp", "dp"}, "outer").value();
  EXPECT_THAT(front.shape(), ElementsAre(4, 2));
  EXPECT_THAT(front.axisNames(), ElementsAre("outer", "tp"));

  EXPECT_EQ(cube.flatten({"pp", "dp", "tp"}, "world").value(),
            DeviceMesh::create({8}, {"world"}).value());
  // One axis is a rename; a merged name may be reused.
  EXPECT_THAT(cube.flatten({"tp"}, "mp").value().axisNames(), ElementsAre("pp", "dp", "mp"));
  EXPECT_THAT(cube.flatten({"dp", "tp"}, "dp").value().axisNames(), ElementsAre("pp", "dp"));
}

TEST(DeviceMeshTest, FlattenKeepsExplicitRanks) {
  DeviceMesh tp = mesh2x2x2().slice("pp", 1).value();
  EXPECT_EQ(tp.flatten({"dp", "tp"}, "dp_tp").value(),
            DeviceMesh::createWithRanks({4}, {"dp_tp"}, {4, 5, 6, 7}).value());
}

TEST(DeviceMeshTest, FlattenRejectsAxesOutOfOrderOrApart) {
  DeviceMesh cube = mesh2x2x2();
  EXPECT_THAT(cube.flatten({"tp", "dp"}, "m").status(),
              StatusIs(kInvalid, AllOf(HasSubstr("(tp, dp)"), HasSubstr("mesh order"),
                                       HasSubstr("flatten (dp, tp) instead"))));
  EXPECT_THAT(cube.flatten({"pp", "tp"}, "m").status(),
              StatusIs(kInvalid, AllOf(HasSubstr("(pp, tp)"), HasSubstr("not neighbours"))));
  EXPECT_THAT(cube.flatten({}, "m").status(), StatusIs(kInvalid, HasSubstr("lists no axes")));
  EXPECT_THAT(cube.flatten({"dp", "dp"}, "m").status(),
              StatusIs(kInvalid, HasSubstr("'dp' is listed twice")));
}

TEST(DeviceMeshTest, FlattenRejectsBadNewNames) {
  DeviceMesh cube = mesh2x2x2();
  EXPECT_THAT(cube.flatten({"dp", "tp"}, "pp").status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'pp' is already used"),
                                       HasSubstr("mesh<pp=2, dp=2, tp=2>"))));
  EXPECT_THAT(cube.flatten({"dp", "tp"}, "dp-tp").status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'dp-tp'"), HasSubstr("not an identifier"))));
}

TEST(DeviceMeshParseTest, NamedForm) {
  EXPECT_EQ(DeviceMesh::parse("dp=2,tp=4", 8).value(), mesh2x4());
  EXPECT_EQ(DeviceMesh::parse("  dp = 2 ,\ttp= 4 ", 8).value(), mesh2x4());
  EXPECT_EQ(DeviceMesh::parse("world=8", 8).value(), DeviceMesh::create({8}, {"world"}).value());
}

TEST(DeviceMeshParseTest, UnnamedFormUsesPositionalNames) {
  EXPECT_EQ(DeviceMesh::parse("2x4", 8).value(), DeviceMesh::create({2, 4}, {"d0", "d1"}).value());
  EXPECT_EQ(DeviceMesh::parse(" 2 x 2 x2 ", 8).value(),
            DeviceMesh::create({2, 2, 2}, {"d0", "d1", "d2"}).value());
  EXPECT_EQ(DeviceMesh::parse("8", 8).value(), DeviceMesh::create({8}, {"d0"}).value());
}

TEST(DeviceMeshParseTest, WithoutWorldSizeTakesTheProduct) {
  EXPECT_EQ(DeviceMesh::parse("dp=2,tp=4").value(), mesh2x4());
  EXPECT_EQ(DeviceMesh::parse("2x2x2").value().size(), 8);
  EXPECT_THAT(DeviceMesh::parse("dp=2,tp=0").status(), StatusIs(kInvalid, HasSubstr("tp")));
}

TEST(DeviceMeshParseTest, ToStringOutputParsesBack) {
  DeviceMesh mesh = mesh2x2x2();
  std::string spec = mesh.toString();
  spec = spec.substr(5, spec.size() - 6);  // Strip "mesh<" and ">".
  EXPECT_EQ(DeviceMesh::parse(spec, 8).value(), mesh);
}

TEST(DeviceMeshParseTest, MalformedUnnamedSpecs) {
  EXPECT_THAT(DeviceMesh::parse("2x", 2).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("\"2x\""), HasSubstr("missing an axis size"),
                                       HasSubstr("column 3"))));
  EXPECT_THAT(DeviceMesh::parse("x4", 4).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("\"x4\""), HasSubstr("missing an axis size"),
                                       HasSubstr("column 1"))));
  EXPECT_THAT(DeviceMesh::parse("2xx4", 8).status(), StatusIs(kInvalid, HasSubstr("column 3")));
  EXPECT_THAT(DeviceMesh::parse("2x0", 2).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("axis size 0"), HasSubstr("column 3"),
                                       HasSubstr("at least 1"))));
  EXPECT_THAT(DeviceMesh::parse("2x-4", 8).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("axis size -4"), HasSubstr("column 3"))));
  EXPECT_THAT(DeviceMesh::parse("2 x four", 8).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'four'"), HasSubstr("column 5"),
                                       HasSubstr("not a whole number"))));
  EXPECT_THAT(DeviceMesh::parse("2,4", 8).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'2,4'"), HasSubstr("\"dp=2,tp=4\""))));
  EXPECT_THAT(
      DeviceMesh::parse("99999999999999999999", 8).status(),
      StatusIs(kInvalid, AllOf(HasSubstr("'99999999999999999999'"), HasSubstr("out of range"))));
  EXPECT_THAT(DeviceMesh::parse("4096x4096x4096", 8).status(),
              StatusIs(kInvalid, HasSubstr("more than 16777216 devices")));
}

TEST(DeviceMeshParseTest, MalformedNamedSpecs) {
  EXPECT_THAT(DeviceMesh::parse("dp=2,dp=4", 8).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'dp' at column 6"),
                                       HasSubstr("already used at column 1"))));
  EXPECT_THAT(DeviceMesh::parse("dp=0", 1).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("axis size 0"), HasSubstr("column 4"))));
  EXPECT_THAT(DeviceMesh::parse("dp=-1", 1).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("axis size -1"), HasSubstr("column 4"))));
  EXPECT_THAT(DeviceMesh::parse("dp=2, tp=abc", 8).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'abc'"), HasSubstr("column 10"),
                                       HasSubstr("not a whole number"))));
  EXPECT_THAT(DeviceMesh::parse("dp=2,tp", 8).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("axis 'tp' at column 6 has no size"))));
  EXPECT_THAT(DeviceMesh::parse("dp=2,=4", 8).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("missing an axis name"), HasSubstr("column 6"))));
  EXPECT_THAT(DeviceMesh::parse("dp=2,", 2).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("missing an axis"), HasSubstr("column 6"))));
  EXPECT_THAT(DeviceMesh::parse("dp=", 2).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("missing an axis size"), HasSubstr("column 4"))));
  EXPECT_THAT(DeviceMesh::parse("2d=2", 2).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'2d'"), HasSubstr("column 1"),
                                       HasSubstr("not an identifier"))));
  EXPECT_THAT(DeviceMesh::parse("dp=2x4", 8).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("'2x4'"), HasSubstr("column 4"))));
}

TEST(DeviceMeshParseTest, EmptySpec) {
  for (const char* spec : {"", "   "}) {
    EXPECT_THAT(DeviceMesh::parse(spec, 8).status(),
                StatusIs(kInvalid, HasSubstr("the spec is empty")))
        << '"' << spec << '"';
  }
}

TEST(DeviceMeshParseTest, WorldSizeMismatch) {
  EXPECT_THAT(DeviceMesh::parse("dp=2,tp=4", 6).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("\"dp=2,tp=4\""), HasSubstr("8 devices"),
                                       HasSubstr("world size is 6"), HasSubstr("product is 6"))));
  EXPECT_THAT(
      DeviceMesh::parse("2x3", 8).status(),
      StatusIs(kInvalid, AllOf(HasSubstr("2x3 has 6 devices"), HasSubstr("world size is 8"))));
  EXPECT_THAT(DeviceMesh::parse("2x4", 0).status(), StatusIs(kInvalid, HasSubstr("world size 0")));
}

}  // namespace
}  // namespace loom::mesh
