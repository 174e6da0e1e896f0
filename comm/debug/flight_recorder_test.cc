// Tests of the flight recorder's ring buffer, its dump format, and the
// analysis of a group's dumps.
#include "comm/debug/flight_recorder.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm::debug {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using State = FlightEntry::State;

CollectiveInfo info(uint64_t seq, std::string op = "all_reduce", int peer = -1) {
  return CollectiveInfo{"tp", 0, 4, seq, std::move(op), peer};
}

// A fresh directory under the test's temporary directory.
std::string makeDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp ? tmp : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::vector<uint64_t> ids(const std::vector<FlightEntry>& entries) {
  std::vector<uint64_t> out;
  for (const FlightEntry& e : entries) out.push_back(e.id);
  return out;
}

TEST(FlightRecorderTest, KeepsTheLastEntriesOldestFirst) {
  FlightRecorder recorder("tp", 0, 4, 3);
  EXPECT_TRUE(recorder.snapshot().empty());
  for (uint64_t seq = 1; seq <= 2; ++seq)
    EXPECT_EQ(recorder.recordScheduled(info(seq), DType::kFloat32, {}), seq);
  EXPECT_THAT(ids(recorder.snapshot()), ElementsAre(1, 2));
  for (uint64_t seq = 3; seq <= 7; ++seq) recorder.recordScheduled(info(seq), DType::kFloat32, {});
  const std::vector<FlightEntry> entries = recorder.snapshot();
  EXPECT_THAT(ids(entries), ElementsAre(5, 6, 7));
  EXPECT_EQ(entries[0].info.seq, 5u);
  EXPECT_EQ(entries[2].info.seq, 7u);
}

TEST(FlightRecorderTest, CapacityIsAtLeastOne) {
  FlightRecorder recorder("tp", 0, 4, 0);
  recorder.recordScheduled(info(1), DType::kFloat32, {});
  recorder.recordScheduled(info(2), DType::kFloat32, {});
  EXPECT_THAT(ids(recorder.snapshot()), ElementsAre(2));
}

TEST(FlightRecorderTest, FinishRecordsStateErrorAndTimeOnce) {
  FlightRecorder recorder("tp", 0, 4, 8);
  const uint64_t ok = recorder.recordScheduled(info(1), DType::kFloat32, {{4}});
  const uint64_t bad = recorder.recordScheduled(info(2), DType::kFloat32, {{4}});
  const uint64_t open = recorder.recordScheduled(info(3), DType::kFloat32, {{4}});
  recorder.recordFinished(ok, absl::OkStatus());
  recorder.recordFinished(bad, absl::DeadlineExceededError("timed out"));
  recorder.recordFinished(bad, absl::OkStatus());  // a second finish changes nothing
  const std::vector<FlightEntry> entries = recorder.snapshot();
  ASSERT_THAT(ids(entries), ElementsAre(ok, bad, open));
  EXPECT_EQ(entries[0].state, State::kCompleted);
  EXPECT_EQ(entries[0].error, "");
  EXPECT_GE(entries[0].finished_at, entries[0].scheduled_at);
  EXPECT_EQ(entries[1].state, State::kFailed);
  EXPECT_EQ(entries[1].error, "timed out");
  EXPECT_EQ(entries[2].state, State::kScheduled);
  EXPECT_EQ(entries[2].finished_at, absl::InfinitePast());
}

TEST(FlightRecorderTest, FinishAfterEvictionIsANoOp) {
  FlightRecorder recorder("tp", 0, 4, 2);
  const uint64_t first = recorder.recordScheduled(info(1), DType::kFloat32, {});
  recorder.recordScheduled(info(2), DType::kFloat32, {});
  recorder.recordScheduled(info(3), DType::kFloat32, {});  // evicts `first`
  recorder.recordFinished(first, absl::OkStatus());
  recorder.recordFinished(0, absl::OkStatus());
  recorder.recordFinished(99, absl::OkStatus());
  for (const FlightEntry& entry : recorder.snapshot()) {
    EXPECT_EQ(entry.state, State::kScheduled) << entry.id;
  }
}

TEST(FlightRecorderTest, ConcurrentRecordingKeepsConsecutiveIds) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 2000;
  FlightRecorder recorder("tp", 0, 4, 64);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&recorder] {
      for (int i = 0; i < kCalls; ++i) {
        const uint64_t id = recorder.recordScheduled(info(i), DType::kFloat32, {{i}});
        recorder.recordFinished(id, absl::OkStatus());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<FlightEntry> entries = recorder.snapshot();
  ASSERT_EQ(entries.size(), 64u);
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].id, kThreads * kCalls - 63 + i);
    EXPECT_EQ(entries[i].state, State::kCompleted);
  }
}

TEST(FlightRecorderTest, DumpReadsBackAndLeavesNoTemporary) {
  const std::string dir = makeDir("round_trip");
  FlightRecorder recorder("mesh/tp/1", 2, 4, 8);
  const uint64_t a =
      recorder.recordScheduled(info(1, "all_gather"), DType::kBFloat16, {{2, 3}, {8, 3}});
  recorder.recordScheduled(info(2, "send", 3), DType::kInt64, {{5}});
  recorder.recordScheduled(info(3, "barrier"), DType::kFloat32, {});
  recorder.recordFinished(a, absl::UnavailableError("peer \"rank 3\" went away"));
  const std::string path = dir + "/" + flightDumpFileName("mesh/tp/1", 2);
  ASSERT_TRUE(recorder.dump(path).ok());

  absl::StatusOr<FlightDump> dump = readFlightDump(path);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->group, "mesh/tp/1");
  EXPECT_EQ(dump->rank, 2);
  EXPECT_EQ(dump->group_size, 4);
  const std::vector<FlightEntry> original = recorder.snapshot();
  ASSERT_EQ(dump->entries.size(), original.size());
  for (size_t i = 0; i < original.size(); ++i) {
    const FlightEntry& want = original[i];
    const FlightEntry& got = dump->entries[i];
    EXPECT_EQ(got.id, want.id);
    EXPECT_EQ(got.info.seq, want.info.seq);
    EXPECT_EQ(got.info.op, want.info.op);
    EXPECT_EQ(got.info.peer, want.info.peer);
    EXPECT_EQ(got.info.group, "mesh/tp/1");
    EXPECT_EQ(got.info.rank, 2);
    EXPECT_EQ(got.dtype, want.dtype);
    EXPECT_EQ(got.shapes, want.shapes);
    EXPECT_EQ(got.state, want.state);
    EXPECT_EQ(got.error, want.error);
    EXPECT_EQ(absl::ToUnixMicros(got.scheduled_at), absl::ToUnixMicros(want.scheduled_at));
    if (want.state == State::kScheduled) {
      EXPECT_EQ(got.finished_at, absl::InfinitePast());
    } else {
      EXPECT_EQ(absl::ToUnixMicros(got.finished_at), absl::ToUnixMicros(want.finished_at));
    }
  }
  std::vector<std::string> files;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    files.push_back(file.path().filename().string());
  }
  EXPECT_THAT(files, ElementsAre("mesh_tp_1_rank2.json"));
}

TEST(FlightRecorderTest, EmptyDumpStillNamesItsRank) {
  const std::string path = makeDir("empty") + "/tp_rank3.json";
  ASSERT_TRUE(FlightRecorder("tp", 3, 4, 8).dump(path).ok());
  absl::StatusOr<FlightDump> dump = readFlightDump(path);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->rank, 3);
  EXPECT_TRUE(dump->entries.empty());
}

TEST(FlightRecorderTest, DumpIntoAMissingDirectoryFails) {
  FlightRecorder recorder("tp", 0, 4, 8);
  EXPECT_THAT(recorder.dump(makeDir("gone") + "/no/such/dir/tp_rank0.json"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("check that its directory exists")));
}

TEST(FlightDumpFileNameTest, ReplacesPathCharacters) {
  EXPECT_EQ(flightDumpFileName("default", 0), "default_rank0.json");
  EXPECT_EQ(flightDumpFileName("mesh/tp/1", 12), "mesh_tp_1_rank12.json");
  EXPECT_EQ(flightDumpFileName("a b:c.d-e", 1), "a_b_c.d-e_rank1.json");
}

// Writes `text` to a file of `dir` and returns its path.
std::string writeFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ReadFlightDumpTest, SaysWhatIsWrong) {
  const std::string dir = makeDir("bad_dumps");
  const std::string entry =
      R"({"id":1,"seq":1,"op":"all_reduce","peer":-1,"dtype":"f32","shapes":[[4]],)"
      R"("state":"scheduled","error":"","scheduled_at_us":5,"finished_at_us":null})";
  auto dumpWith = [&](const std::string& header, const std::string& entries) {
    return absl::StrCat("{", header, R"(,"entries":[)", entries, "]}");
  };
  const std::string header = R"("version":1,"group":"tp","rank":1,"group_size":2)";
  auto read = [&](const std::string& text) {
    return readFlightDump(writeFile(dir, "x_rank1.json", text)).status();
  };
  ASSERT_TRUE(read(dumpWith(header, entry)).ok());
  EXPECT_THAT(readFlightDump(dir + "/absent.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot open")));
  const std::string whole = dumpWith(header, entry);
  EXPECT_THAT(read(whole.substr(0, whole.size() / 2)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
  EXPECT_THAT(read("[1, 2]"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a JSON object")));
  EXPECT_THAT(read(dumpWith(R"("version":2,"group":"tp","rank":1,"group_size":2)", entry)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"version\" is 2; this build reads version 1")));
  EXPECT_THAT(read(dumpWith(R"("version":1,"group":"tp","rank":2,"group_size":2)", entry)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"rank\" is 2, outside a group of 2")));
  EXPECT_THAT(read(dumpWith(R"("version":1,"rank":1,"group_size":2)", entry)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"group\" is missing")));
  auto withEntry = [&](const std::string& from, const std::string& to) {
    std::string e = entry;
    e.replace(e.find(from), from.size(), to);
    return read(dumpWith(header, e));
  };
  EXPECT_THAT(withEntry(R"("f32")", R"("f33")"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("entry 0: \"dtype\" 'f33' is not a dtype")));
  EXPECT_THAT(withEntry(R"("scheduled")", R"("lost")"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'lost' is not one of")));
  EXPECT_THAT(withEntry(R"("scheduled")", R"("completed")"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must be null exactly while the call is scheduled")));
  EXPECT_THAT(withEntry(R"("seq":1)", R"("seq":-1)"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"seq\" is not a non-negative integer")));
  EXPECT_THAT(withEntry(R"([[4]])", R"([4])"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"shapes\" is not a list of shapes")));
  EXPECT_THAT(withEntry(R"("peer":-1)", R"("peer":2)"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"peer\" is not a rank of the group")));
}

// One recorded call of a synthetic rank.
struct Call {
  std::string op = "all_reduce";
  std::vector<std::vector<int64_t>> shapes = {{4}};
  State state = State::kCompleted;
  int peer = -1;
};

// Dumps a rank that made `calls` as calls #first, #first+1, ...
std::string dumpRank(const std::string& dir, int rank, int size, const std::vector<Call>& calls,
                     int capacity = 100, uint64_t first = 1, const std::string& group = "tp") {
  FlightRecorder recorder(group, rank, size, capacity);
  uint64_t seq = first;
  for (const Call& call : calls) {
    const uint64_t id = recorder.recordScheduled(
        CollectiveInfo{group, rank, size, seq++, call.op, call.peer}, DType::kFloat32, call.shapes);
    if (call.state == State::kCompleted) recorder.recordFinished(id, absl::OkStatus());
    if (call.state == State::kFailed) {
      recorder.recordFinished(id, absl::DeadlineExceededError("timed out after 10s"));
    }
  }
  const std::string path = dir + "/" + flightDumpFileName(group, rank);
  EXPECT_TRUE(recorder.dump(path).ok());
  return path;
}

std::vector<Call> calls(int n, State last = State::kCompleted) {
  std::vector<Call> out(n);
  out.back().state = last;
  return out;
}

TEST(AnalyzeFlightDumpsTest, ConsistentRanks) {
  const std::string dir = makeDir("consistent");
  std::vector<std::string> paths;
  for (int r = 0; r < 4; ++r) paths.push_back(dumpRank(dir, r, 4, calls(5)));
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_TRUE(analysis->lagging_ranks.empty());
  EXPECT_TRUE(analysis->missing_ranks.empty());
  EXPECT_EQ(analysis->first_divergent_seq, 0u);
  EXPECT_EQ(analysis->divergence, "");
  EXPECT_EQ(analysis->report,
            "flight recorder dumps of group 'tp': 4 ranks, 4 readable dumps\n"
            "  rank 0: 5 entries, calls #1..#5, last all_reduce #5 completed\n"
            "  rank 1: 5 entries, calls #1..#5, last all_reduce #5 completed\n"
            "  rank 2: 5 entries, calls #1..#5, last all_reduce #5 completed\n"
            "  rank 3: 5 entries, calls #1..#5, last all_reduce #5 completed\n"
            "consistent: ranks 0,1,2,3 reached call #5 and recorded the same calls\n");
}

TEST(AnalyzeFlightDumpsTest, DifferentWindowsOfTheSameCallsAgree) {
  const std::string dir = makeDir("windows");
  const std::vector<std::string> paths = {dumpRank(dir, 0, 2, calls(9), /*capacity=*/3),
                                          dumpRank(dir, 1, 2, calls(9))};
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_TRUE(analysis->lagging_ranks.empty());
  EXPECT_EQ(analysis->first_divergent_seq, 0u);
  EXPECT_THAT(analysis->report, HasSubstr("rank 0: 3 entries, calls #7..#9"));
}

TEST(AnalyzeFlightDumpsTest, NamesTheRankThatStoppedEarly) {
  const std::string dir = makeDir("lagging");
  std::vector<std::string> paths;
  for (int r = 0; r < 4; ++r) {
    paths.push_back(dumpRank(dir, r, 4, r == 2 ? calls(5) : calls(6, State::kFailed)));
  }
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_THAT(analysis->lagging_ranks, ElementsAre(2));
  EXPECT_EQ(analysis->first_divergent_seq, 0u);
  EXPECT_THAT(analysis->report,
              HasSubstr("lagging: rank 2 stopped at call #5 while ranks 0,1,3 went on (up to "
                        "#6); look at what it did after call #5\n"));
  EXPECT_THAT(analysis->report,
              HasSubstr("rank 0: 6 entries, calls #1..#6, last all_reduce #6 failed (timed out "
                        "after 10s)"));
}

TEST(AnalyzeFlightDumpsTest, NamesTheRankStillInACallOthersCompleted) {
  const std::string dir = makeDir("stuck");
  const std::vector<std::string> paths = {dumpRank(dir, 0, 3, calls(4)),
                                          dumpRank(dir, 1, 3, calls(4, State::kScheduled)),
                                          dumpRank(dir, 2, 3, calls(4))};
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_THAT(analysis->lagging_ranks, ElementsAre(1));
  EXPECT_THAT(analysis->report,
              HasSubstr("lagging: rank 1 had not finished call #4, which ranks 0,2 completed"));
}

TEST(AnalyzeFlightDumpsTest, FindsTheFirstDivergentCall) {
  const std::string dir = makeDir("divergent");
  std::vector<Call> odd = calls(6, State::kScheduled);
  odd[2].op = "reduce";   // call #3
  odd[4].shapes = {{8}};  // call #5 differs too, but later
  std::vector<std::string> paths;
  for (int r = 0; r < 3; ++r) {
    paths.push_back(dumpRank(dir, r, 3, r == 1 ? odd : calls(6, State::kScheduled)));
  }
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->first_divergent_seq, 3u);
  EXPECT_EQ(analysis->divergence,
            "at call #3: rank 1 called reduce(f32, shapes [[4]]), ranks 0,2 called "
            "all_reduce(f32, shapes [[4]])");
  EXPECT_TRUE(analysis->lagging_ranks.empty());
  EXPECT_THAT(analysis->report, HasSubstr("first divergence: at call #3: rank 1 called reduce"));
}

TEST(AnalyzeFlightDumpsTest, ShapesOfSymmetricCallsMustAgree) {
  const std::string dir = makeDir("shapes");
  std::vector<Call> wide = calls(2);
  wide[1].shapes = {{4, 2}};
  const std::vector<std::string> paths = {dumpRank(dir, 0, 2, calls(2)), dumpRank(dir, 1, 2, wide)};
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->divergence,
            "at call #2: rank 0 called all_reduce(f32, shapes [[4]]), rank 1 called "
            "all_reduce(f32, shapes [[4, 2]])");
}

TEST(AnalyzeFlightDumpsTest, RootedAndPointToPointCallsMayDifferPerRank) {
  const std::string dir = makeDir("rooted");
  // Call #2 is a gather: only the root holds the output list. Call #3 is a
  // send on rank 0 and a recv on rank 1.
  std::vector<Call> root = calls(4);
  root[1] = Call{"gather", {{4}, {4}, {4}}};
  root[2] = Call{"send", {{4}}, State::kCompleted, 1};
  std::vector<Call> leaf = calls(4);
  leaf[1] = Call{"gather", {{4}}};
  leaf[2] = Call{"recv", {{4}}, State::kCompleted, 0};
  const std::vector<std::string> paths = {dumpRank(dir, 0, 2, root), dumpRank(dir, 1, 2, leaf)};
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_EQ(analysis->first_divergent_seq, 0u) << analysis->report;
  EXPECT_TRUE(analysis->lagging_ranks.empty()) << analysis->report;
}

TEST(AnalyzeFlightDumpsTest, PartialSetNamesTheMissingRanks) {
  const std::string dir = makeDir("partial");
  const std::vector<std::string> paths = {dumpRank(dir, 0, 3, calls(4)),
                                          dir + "/tp_rank1.json",  // never written
                                          dumpRank(dir, 2, 3, calls(4))};
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps({paths[0], paths[2]});
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_THAT(analysis->missing_ranks, ElementsAre(1));
  EXPECT_THAT(analysis->report, HasSubstr("missing: rank 1: no dump among the files given\n"));
  EXPECT_THAT(analysis->report,
              HasSubstr("consistent: ranks 0,2 reached call #4 and recorded the same calls; "
                        "rank 1 left no readable dump"));

  analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_THAT(analysis->missing_ranks, ElementsAre(1));
  EXPECT_THAT(analysis->report, HasSubstr("missing: rank 1: " + paths[1] + ": cannot open"));
}

TEST(AnalyzeFlightDumpsTest, CorruptDumpCountsAsMissing) {
  const std::string dir = makeDir("corrupt");
  std::vector<std::string> paths;
  for (int r = 0; r < 3; ++r) paths.push_back(dumpRank(dir, r, 3, calls(r == 0 ? 3 : 4)));
  std::string text;
  {
    std::ifstream in(paths[1]);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  writeFile(dir, "tp_rank1.json", text.substr(0, text.size() / 3));
  absl::StatusOr<FlightAnalysis> analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_THAT(analysis->missing_ranks, ElementsAre(1));
  EXPECT_THAT(analysis->lagging_ranks, ElementsAre(0));
  EXPECT_THAT(analysis->report, HasSubstr("  rank 1: no readable dump\n"));
  EXPECT_THAT(analysis->report, HasSubstr("tp_rank1.json: not valid JSON"));

  // A bad file named after a rank outside the group is still reported.
  paths.push_back(writeFile(dir, "tp_rank7.json", "{\"version\":"));
  analysis = analyzeFlightDumps(paths);
  ASSERT_TRUE(analysis.ok()) << analysis.status();
  EXPECT_THAT(analysis->missing_ranks, ElementsAre(1));
  EXPECT_THAT(analysis->report, HasSubstr("  unreadable: " + dir + "/tp_rank7.json: not valid"));
}

TEST(AnalyzeFlightDumpsTest, RejectsInputItCannotUse) {
  const std::string dir = makeDir("rejects");
  EXPECT_THAT(analyzeFlightDumps({}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no flight recorder dumps")));
  EXPECT_THAT(analyzeFlightDumps({writeFile(dir, "junk.json", "{")}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("none of the 1 flight recorder dumps is readable")));
  const std::string tp0 = dumpRank(dir, 0, 2, calls(2));
  const std::string dp0 = dumpRank(dir, 0, 2, calls(2), 100, 1, "dp");
  EXPECT_THAT(analyzeFlightDumps({tp0, dp0}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dumps of different groups")));
  EXPECT_THAT(analyzeFlightDumps({tp0, tp0}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("two dumps of rank 0")));
}

}  // namespace
}  // namespace loom::comm::debug
