// Trace recording, clock alignment, merging on rank 0 and the summary.
#include "runtime/executor/trace_recorder.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace loom::runtime {
namespace {

using json = nlohmann::json;

json eventJson(const TraceEvent& e) {
  return {{"name", e.name},
          {"track", e.track},
          {"phase", e.phase},
          {"step", e.step},
          {"index", e.index},
          {"block", e.block},
          {"micro_batch", e.micro_batch},
          {"start_us", e.start_us},
          {"duration_us", e.duration_us},
          {"collective", e.collective},
          {"axes", e.axes},
          {"bytes", e.bytes},
          {"wait_us", e.wait_us}};
}

TraceEvent eventFrom(const json& j) {
  TraceEvent e;
  e.name = j.value("name", "");
  e.track = j.value("track", "");
  e.phase = j.value("phase", "");
  e.step = j.value("step", int64_t{0});
  e.index = j.value("index", int64_t{-1});
  e.block = j.value("block", "");
  e.micro_batch = j.value("micro_batch", int64_t{-1});
  e.start_us = j.value("start_us", 0.0);
  e.duration_us = j.value("duration_us", 0.0);
  e.collective = j.value("collective", "");
  e.axes = j.value("axes", "");
  e.bytes = j.value("bytes", int64_t{0});
  e.wait_us = j.value("wait_us", 0.0);
  return e;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Perfetto's metadata naming thread `tid` of process `pid`.
json threadName(int pid, int tid, const std::string& name) {
  return {
      {"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// Rank r's events as Perfetto slices: one process per rank, thread 1 =
// compute, 2 = the pipeline bubbles (when the rank has any), one thread
// per communication group after them.
void appendRank(int r, const json& list, json& traceEvents, std::vector<TraceEvent>& events) {
  std::map<std::string, int> tids = {{"compute", 1}};
  traceEvents.push_back({{"ph", "M"},
                         {"name", "process_name"},
                         {"pid", r},
                         {"args", {{"name", absl::StrCat("rank ", r)}}}});
  traceEvents.push_back(threadName(r, 1, "compute"));
  for (const json& j : list) {
    if (j.value("track", "") != kBubbleTrack) continue;
    tids.emplace(kBubbleTrack, 2);
    traceEvents.push_back(threadName(r, 2, kBubbleTrack));
    break;
  }
  for (const json& j : list) {
    TraceEvent e = eventFrom(j);
    auto [it, inserted] = tids.emplace(e.track, static_cast<int>(tids.size()) + 1);
    if (inserted) traceEvents.push_back(threadName(r, it->second, e.track));
    json args = {{"phase", e.phase}, {"step", e.step}, {"index", e.index}};
    if (!e.collective.empty()) {
      args["axes"] = e.axes;
      args["bytes"] = e.bytes;
    }
    if (!e.block.empty()) args["block"] = e.block;
    if (e.micro_batch >= 0) args["micro_batch"] = e.micro_batch;
    traceEvents.push_back({{"ph", "X"},
                           {"name", e.name},
                           {"cat", e.phase},
                           {"pid", r},
                           {"tid", it->second},
                           {"ts", e.start_us},
                           {"dur", e.duration_us},
                           {"args", args}});
    events.push_back(std::move(e));
  }
}

}  // namespace

double TraceRecorder::nowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Status TraceRecorder::alignClocks(comm::ProcessGroup& world) {
  absl::StatusOr<std::shared_ptr<comm::Work>> barrier = world.barrier();
  if (!barrier.ok()) return barrier.status();
  if (absl::Status s = (*barrier)->wait(); !s.ok()) return s;
  double mine = nowUs();
  std::vector<double> all(world.size());
  absl::StatusOr<std::shared_ptr<comm::Work>> gather =
      world.allGatherIntoTensor(comm::Tensor(all.data(), comm::DType::kFloat64, {world.size()}),
                                comm::Tensor(&mine, comm::DType::kFloat64, {1}));
  if (!gather.ok()) return gather.status();
  if (absl::Status s = (*gather)->wait(); !s.ok()) return s;
  offset_us_ = all[world.rank()] - all[0];
  return absl::OkStatus();
}

void TraceRecorder::add(TraceEvent event) {
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

std::vector<TraceEvent> TraceRecorder::events() const {
  absl::MutexLock lock(&mu_);
  return events_;
}

void TraceRecorder::clear() {
  absl::MutexLock lock(&mu_);
  events_.clear();
}

json TraceRecorder::summarize(const std::vector<std::vector<TraceEvent>>& events) {
  const int ranks = static_cast<int>(events.size());
  // Per collective kind and axes: time on the wire and time compute waited.
  struct Totals {
    int64_t count = 0;
    double comm_us = 0;
    double exposed_us = 0;
    int64_t bytes = 0;
  };
  std::map<std::pair<std::string, std::string>, Totals> perCollective;
  // One collective instance across ranks: (step, plan index) -> issue times.
  std::map<std::tuple<int64_t, int64_t, std::string>, std::vector<std::pair<double, int>>> issues;
  json perRank = json::array();
  for (int r = 0; r < ranks; ++r) {
    double compute = 0, comm = 0, exposed = 0, bubble = 0, first = 1e300, last = -1e300;
    for (const TraceEvent& e : events[r]) {
      first = std::min(first, e.start_us);
      last = std::max(last, e.start_us + e.duration_us);
      if (e.track == kBubbleTrack) {
        bubble += e.duration_us;
      } else if (!e.collective.empty() && e.track != "compute") {
        Totals& t = perCollective[{e.collective, e.axes}];
        ++t.count;
        t.comm_us += e.duration_us;
        t.bytes += e.bytes;
        comm += e.duration_us;
        issues[{e.step, e.index, e.axes}].push_back({e.start_us, r});
      } else if (!e.collective.empty()) {  // the wait of a collective
        perCollective[{e.collective, e.axes}].exposed_us += e.duration_us;
        exposed += e.duration_us;
      } else {
        compute += e.duration_us;
      }
    }
    perRank.push_back({{"rank", r},
                       {"compute_ms", compute / 1e3},
                       {"comm_ms", comm / 1e3},
                       {"exposed_comm_ms", exposed / 1e3},
                       {"bubble_ms", bubble / 1e3},
                       {"span_ms", last > first ? (last - first) / 1e3 : 0.0}});
  }
  json collectives = json::array();
  for (const auto& [key, t] : perCollective) {
    collectives.push_back({{"kind", key.first},
                           {"axes", key.second},
                           {"count_per_rank", ranks ? t.count / ranks : 0},
                           {"bytes_per_rank", ranks ? t.bytes / ranks : 0},
                           {"comm_ms_per_rank", ranks ? t.comm_us / ranks / 1e3 : 0.0},
                           {"exposed_ms_per_rank", ranks ? t.exposed_us / ranks / 1e3 : 0.0}});
  }
  // Stragglers: in every collective instance, the rank that issued last
  // (every other rank of its group waited for it), and by how much it
  // trailed the median issue time.
  std::vector<int64_t> timesLast(ranks, 0);
  std::vector<double> lateness(ranks, 0);
  for (auto& [key, list] : issues) {
    if (list.size() < 2) continue;
    std::vector<double> times;
    for (auto& [t, r] : list) times.push_back(t);
    auto latest = std::max_element(list.begin(), list.end());
    ++timesLast[latest->second];
    lateness[latest->second] += latest->first - median(times);
  }
  json stragglers = json::array();
  for (int r = 0; r < ranks; ++r) {
    stragglers.push_back({{"rank", r},
                          {"times_last", timesLast[r]},
                          {"mean_lateness_us", timesLast[r] ? lateness[r] / timesLast[r] : 0.0}});
  }
  return {{"collectives", collectives}, {"ranks", perRank}, {"stragglers", stragglers}};
}

absl::StatusOr<json> TraceRecorder::merge(comm::ProcessGroup& world) const {
  json mine = json::array();
  for (const TraceEvent& e : events()) {
    TraceEvent aligned = e;
    aligned.start_us -= offset_us_;
    mine.push_back(eventJson(aligned));
  }
  const std::string text = mine.dump();
  int64_t size = static_cast<int64_t>(text.size());
  std::vector<int64_t> sizes(world.size());
  absl::StatusOr<std::shared_ptr<comm::Work>> work =
      world.allGatherIntoTensor(comm::Tensor(sizes.data(), comm::DType::kInt64, {world.size()}),
                                comm::Tensor(&size, comm::DType::kInt64, {1}));
  if (!work.ok()) return work.status();
  if (absl::Status s = (*work)->wait(); !s.ok()) return s;
  const int64_t maxSize = std::max<int64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
  std::vector<uint8_t> padded(maxSize, 0), all(maxSize * world.size(), 0);
  std::memcpy(padded.data(), text.data(), text.size());
  work = world.allGatherIntoTensor(
      comm::Tensor(all.data(), comm::DType::kUInt8, {maxSize * world.size()}),
      comm::Tensor(padded.data(), comm::DType::kUInt8, {maxSize}));
  if (!work.ok()) return work.status();
  if (absl::Status s = (*work)->wait(); !s.ok()) return s;
  if (world.rank() != 0) return json::object();

  std::vector<std::vector<TraceEvent>> perRank(world.size());
  json traceEvents = json::array();
  for (int r = 0; r < world.size(); ++r) {
    const std::string part(reinterpret_cast<const char*>(all.data()) + r * maxSize, sizes[r]);
    json list = json::parse(part, nullptr, false);
    if (list.is_discarded()) {
      return absl::DataLossError(absl::StrCat("trace of rank ", r, " arrived corrupt"));
    }
    appendRank(r, list, traceEvents, perRank[r]);
  }
  return json{
      {"traceEvents", traceEvents}, {"displayTimeUnit", "ms"}, {"loomSummary", summarize(perRank)}};
}

}  // namespace loom::runtime
