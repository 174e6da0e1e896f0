// The flight recorder's ring buffer, its JSON dump, and the analysis that
// `comm-flight-analyze` runs over the dumps of a group's ranks.
#include "comm/debug/flight_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/errors.h"
#include "nlohmann/json.hpp"

namespace loom::comm::debug {
namespace {

using nlohmann::json;
// Keeps the documented field order in dumps.
using ordered_json = nlohmann::ordered_json;

constexpr int kDumpVersion = 1;

std::string str(std::string_view text) { return std::string(text); }

std::string_view stateName(FlightEntry::State state) {
  switch (state) {
    case FlightEntry::State::kScheduled:
      return "scheduled";
    case FlightEntry::State::kCompleted:
      return "completed";
    case FlightEntry::State::kFailed:
      return "failed";
  }
  return "?";
}

std::optional<FlightEntry::State> stateFromName(std::string_view name) {
  for (FlightEntry::State state : {FlightEntry::State::kScheduled, FlightEntry::State::kCompleted,
                                   FlightEntry::State::kFailed}) {
    if (stateName(state) == name) return state;
  }
  return std::nullopt;
}

ordered_json entryToJson(const FlightEntry& entry) {
  ordered_json j = ordered_json::object();
  j["id"] = entry.id;
  j["seq"] = entry.info.seq;
  j["op"] = entry.info.op;
  j["peer"] = entry.info.peer;
  j["dtype"] = str(dtypeName(entry.dtype));
  j["shapes"] = entry.shapes;
  j["state"] = str(stateName(entry.state));
  j["error"] = entry.error;
  j["scheduled_at_us"] = absl::ToUnixMicros(entry.scheduled_at);
  if (entry.state == FlightEntry::State::kScheduled) {
    j["finished_at_us"] = nullptr;
  } else {
    j["finished_at_us"] = absl::ToUnixMicros(entry.finished_at);
  }
  return j;
}

absl::Status writeFileAtomically(const std::string& path, const std::string& contents) {
  // Unique per process and call, so that concurrent dumps of one file do not
  // share a temporary.
  static std::atomic<uint64_t> counter{0};
  const std::string temp = absl::StrCat(path, ".tmp.", getpid(), ".", counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot write flight recorder dump ", temp,
                                                   "; check that its directory exists and is "
                                                   "writable"));
  }
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      ::unlink(temp.c_str());
      return absl::ErrnoToStatus(error, absl::StrCat("cannot write flight recorder dump ", temp));
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot flush flight recorder dump ", temp));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot rename ", temp, " to ", path));
  }
  return absl::OkStatus();
}

// Typed access to a JSON object's fields, each failure naming the field.
class Fields {
 public:
  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

  absl::StatusOr<const json*> field(const char* name) const {
    auto it = object_.find(name);
    if (it == object_.end()) return bad(name, "is missing");
    return &*it;
  }
  absl::StatusOr<int64_t> integer(const char* name) const {
    absl::StatusOr<const json*> value = field(name);
    if (!value.ok()) return value.status();
    if (!(*value)->is_number_integer()) return bad(name, "is not an integer");
    return (*value)->get<int64_t>();
  }
  absl::StatusOr<uint64_t> count(const char* name) const {
    absl::StatusOr<const json*> value = field(name);
    if (!value.ok()) return value.status();
    if (!(*value)->is_number_unsigned()) return bad(name, "is not a non-negative integer");
    return (*value)->get<uint64_t>();
  }
  absl::StatusOr<std::string> text(const char* name) const {
    absl::StatusOr<const json*> value = field(name);
    if (!value.ok()) return value.status();
    if (!(*value)->is_string()) return bad(name, "is not a string");
    return (*value)->get<std::string>();
  }
  absl::Status bad(const char* name, std::string_view why) const {
    return invalidArgumentError(absl::StrCat(where_, ": \"", name, "\" ", str(why)));
  }

 private:
  const json& object_;
  std::string where_;
};

#define LOOM_ASSIGN_OR_RETURN(lhs, expr)        \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

absl::StatusOr<FlightEntry> entryFromJson(const json& j, const FlightDump& dump,
                                          const std::string& where) {
  if (!j.is_object()) return invalidArgumentError(absl::StrCat(where, " is not an object"));
  const Fields f(j, where);
  FlightEntry entry;
  entry.info.group = dump.group;
  entry.info.rank = dump.rank;
  entry.info.group_size = dump.group_size;
  LOOM_ASSIGN_OR_RETURN(id, f.count("id"));
  LOOM_ASSIGN_OR_RETURN(seq, f.count("seq"));
  LOOM_ASSIGN_OR_RETURN(op, f.text("op"));
  LOOM_ASSIGN_OR_RETURN(peer, f.integer("peer"));
  LOOM_ASSIGN_OR_RETURN(dtype_name, f.text("dtype"));
  LOOM_ASSIGN_OR_RETURN(state_name, f.text("state"));
  LOOM_ASSIGN_OR_RETURN(error, f.text("error"));
  LOOM_ASSIGN_OR_RETURN(scheduled_us, f.integer("scheduled_at_us"));
  LOOM_ASSIGN_OR_RETURN(shapes, f.field("shapes"));
  LOOM_ASSIGN_OR_RETURN(finished, f.field("finished_at_us"));
  entry.id = id;
  entry.info.seq = seq;
  entry.info.op = std::move(op);
  if (peer < -1 || peer >= dump.group_size) return f.bad("peer", "is not a rank of the group");
  entry.info.peer = static_cast<int>(peer);
  absl::StatusOr<DType> dtype = dtypeFromName(dtype_name);
  if (!dtype.ok()) return f.bad("dtype", absl::StrCat("'", dtype_name, "' is not a dtype"));
  entry.dtype = *dtype;
  std::optional<FlightEntry::State> state = stateFromName(state_name);
  if (!state) {
    return f.bad("state",
                 absl::StrCat("'", state_name, "' is not one of scheduled, completed, failed"));
  }
  entry.state = *state;
  entry.error = std::move(error);
  if (!shapes->is_array()) return f.bad("shapes", "is not a list of shapes");
  for (const json& shape : *shapes) {
    if (!shape.is_array()) return f.bad("shapes", "is not a list of shapes");
    std::vector<int64_t>& dims = entry.shapes.emplace_back();
    for (const json& dim : shape) {
      if (!dim.is_number_integer())
        return f.bad("shapes", "holds a dimension that is not an integer");
      dims.push_back(dim.get<int64_t>());
    }
  }
  entry.scheduled_at = absl::FromUnixMicros(scheduled_us);
  if (finished->is_null() != (entry.state == FlightEntry::State::kScheduled)) {
    return f.bad("finished_at_us", "must be null exactly while the call is scheduled");
  }
  if (!finished->is_null()) {
    if (!finished->is_number_integer()) return f.bad("finished_at_us", "is not an integer");
    entry.finished_at = absl::FromUnixMicros(finished->get<int64_t>());
  }
  return entry;
}

// The part of a recorded call that every rank must agree on: op and dtype,
// and the shapes for ops whose shapes are the same on every rank (rooted and
// all-to-all calls legitimately differ per rank).
std::string callKey(const FlightEntry& entry) {
  static const std::set<std::string, std::less<>> kSymmetricOps = {
      "all_reduce", "all_gather",     "all_gather_into_tensor", "broadcast",
      "reduce",     "reduce_scatter", "reduce_scatter_tensor",  "barrier"};
  std::string key = absl::StrCat(entry.info.op, "(", str(dtypeName(entry.dtype)));
  if (kSymmetricOps.count(entry.info.op) > 0) {
    absl::StrAppend(&key, ", shapes [",
                    absl::StrJoin(entry.shapes, ", ",
                                  [](std::string* out, const std::vector<int64_t>& shape) {
                                    absl::StrAppend(out, "[", absl::StrJoin(shape, ", "), "]");
                                  }),
                    "]");
  }
  absl::StrAppend(&key, ")");
  return key;
}

std::string ranksText(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ","));
}

// "tp_rank3.json" -> 3, so that an unreadable dump still names its rank.
std::optional<int> rankFromFileName(const std::string& path) {
  static const std::regex kPattern("_rank([0-9]{1,6})\\.json$");
  std::smatch match;
  if (!std::regex_search(path, match, kPattern)) return std::nullopt;
  return std::stoi(match[1].str());
}

struct RankView {
  const FlightDump* dump = nullptr;
  size_t file = 0;  // index of the dump's path
  // Collective entries by sequence number; send/recv are left out, as only
  // their two peers issue them.
  std::map<uint64_t, const FlightEntry*> calls;
  uint64_t last_seq = 0;
};

}  // namespace

FlightRecorder::FlightRecorder(std::string group, int rank, int group_size, int capacity)
    : group_(std::move(group)),
      rank_(rank),
      group_size_(group_size),
      capacity_(std::max(capacity, 1)) {}

uint64_t FlightRecorder::recordScheduled(const CollectiveInfo& info, DType dtype,
                                         std::vector<std::vector<int64_t>> shapes) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  // Once full, the slot of the oldest entry is reused, keeping its strings'
  // memory.
  FlightEntry& entry = static_cast<int>(ring_.size()) < capacity_ ? ring_.emplace_back()
                                                                  : ring_[(id - 1) % capacity_];
  entry.id = id;
  entry.info = info;
  entry.dtype = dtype;
  entry.shapes = std::move(shapes);
  entry.state = FlightEntry::State::kScheduled;
  entry.error.clear();
  entry.scheduled_at = now;
  entry.finished_at = absl::InfinitePast();
  return id;
}

void FlightRecorder::recordFinished(uint64_t id, const absl::Status& status) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (id == 0 || id >= next_id_ || next_id_ - id > static_cast<uint64_t>(capacity_)) return;
  FlightEntry& entry = ring_[(id - 1) % capacity_];
  if (entry.id != id || entry.state != FlightEntry::State::kScheduled) return;
  entry.state = status.ok() ? FlightEntry::State::kCompleted : FlightEntry::State::kFailed;
  entry.error = std::string(status.message());
  entry.finished_at = now;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<FlightEntry> entries;
  entries.reserve(ring_.size());
  const size_t oldest = static_cast<int>(ring_.size()) < capacity_ ? 0 : (next_id_ - 1) % capacity_;
  for (size_t i = 0; i < ring_.size(); ++i) entries.push_back(ring_[(oldest + i) % ring_.size()]);
  return entries;
}

absl::Status FlightRecorder::dump(const std::string& path) const {
  const std::vector<FlightEntry> entries = snapshot();
  ordered_json header = ordered_json::object();
  header["version"] = kDumpVersion;
  header["group"] = group_;
  header["rank"] = rank_;
  header["group_size"] = group_size_;
  // One entry per line, so that the dump reads and greps well.
  std::string text = header.dump();
  text.pop_back();
  absl::StrAppend(&text, ",\"entries\":[");
  for (size_t i = 0; i < entries.size(); ++i) {
    absl::StrAppend(&text, i == 0 ? "\n" : ",\n", entryToJson(entries[i]).dump());
  }
  absl::StrAppend(&text, "\n]}\n");
  return writeFileAtomically(path, text);
}

std::string flightDumpFileName(std::string_view group, int rank) {
  std::string name(group);
  for (char& c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    if (!plain) c = '_';
  }
  return absl::StrCat(name, "_rank", rank, ".json");
}

absl::StatusOr<FlightDump> readFlightDump(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return invalidArgumentError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string text = contents.str();
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return invalidArgumentError(
        absl::StrCat(path, ": not valid JSON (", text.size(), " bytes; truncated or corrupt)"));
  }
  if (!j.is_object()) return invalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  const Fields f(j, path);
  LOOM_ASSIGN_OR_RETURN(version, f.integer("version"));
  if (version != kDumpVersion) {
    return f.bad("version",
                 absl::StrCat("is ", version, "; this build reads version ", kDumpVersion));
  }
  FlightDump dump;
  LOOM_ASSIGN_OR_RETURN(group, f.text("group"));
  LOOM_ASSIGN_OR_RETURN(rank, f.integer("rank"));
  LOOM_ASSIGN_OR_RETURN(group_size, f.integer("group_size"));
  LOOM_ASSIGN_OR_RETURN(entries, f.field("entries"));
  if (group_size < 1) return f.bad("group_size", "is not positive");
  if (rank < 0 || rank >= group_size) {
    return f.bad("rank", absl::StrCat("is ", rank, ", outside a group of ", group_size));
  }
  if (!entries->is_array()) return f.bad("entries", "is not a list");
  dump.group = std::move(group);
  dump.rank = static_cast<int>(rank);
  dump.group_size = static_cast<int>(group_size);
  for (size_t i = 0; i < entries->size(); ++i) {
    absl::StatusOr<FlightEntry> entry =
        entryFromJson((*entries)[i], dump, absl::StrCat(path, ": entry ", i));
    if (!entry.ok()) return entry.status();
    dump.entries.push_back(*std::move(entry));
  }
  return dump;
}

absl::StatusOr<FlightAnalysis> analyzeFlightDumps(const std::vector<std::string>& paths) {
  if (paths.empty()) return invalidArgumentError("no flight recorder dumps to analyze");
  std::vector<FlightDump> dumps;
  std::vector<std::string> dump_paths;
  // Unreadable files: by the rank their name gives, or unattributed.
  std::map<int, std::string> unreadable;
  std::vector<std::string> unattributed;
  for (const std::string& path : paths) {
    absl::StatusOr<FlightDump> dump = readFlightDump(path);
    if (dump.ok()) {
      dumps.push_back(*std::move(dump));
      dump_paths.push_back(path);
      continue;
    }
    const std::string reason(dump.status().message());
    if (std::optional<int> rank = rankFromFileName(path)) {
      unreadable[*rank] = reason;
    } else {
      unattributed.push_back(reason);
    }
  }
  if (dumps.empty()) {
    std::vector<std::string> reasons = unattributed;
    for (const auto& [rank, reason] : unreadable) reasons.push_back(reason);
    return invalidArgumentError(
        absl::StrCat("none of the ", paths.size(),
                     " flight recorder dumps is readable: ", absl::StrJoin(reasons, "; ")));
  }

  const std::string& group = dumps.front().group;
  const int size = dumps.front().group_size;
  std::map<int, RankView> ranks;
  for (size_t i = 0; i < dumps.size(); ++i) {
    const FlightDump& dump = dumps[i];
    if (dump.group != group || dump.group_size != size) {
      return invalidArgumentError(
          absl::StrCat("dumps of different groups: ", dump_paths.front(), " is rank ",
                       dumps.front().rank, " of group '", group, "' (", size, " ranks), ",
                       dump_paths[i], " is rank ", dump.rank, " of group '", dump.group, "' (",
                       dump.group_size, " ranks); analyze one group's dumps at a time"));
    }
    if (auto it = ranks.find(dump.rank); it != ranks.end()) {
      return invalidArgumentError(absl::StrCat("two dumps of rank ", dump.rank, " of group '",
                                               group, "': ", dump_paths[it->second.file], " and ",
                                               dump_paths[i], "; pass each rank's dump once"));
    }
    RankView& view = ranks[dump.rank];
    view.dump = &dump;
    view.file = i;
    for (const FlightEntry& entry : dump.entries) {
      if (entry.info.peer >= 0) continue;
      view.calls[entry.info.seq] = &entry;
      view.last_seq = std::max(view.last_seq, entry.info.seq);
    }
  }

  // An unreadable file whose name points outside the group, or at a rank
  // that has a readable dump, still gets reported, just not as that rank.
  for (auto it = unreadable.begin(); it != unreadable.end();) {
    if (it->first < size && ranks.count(it->first) == 0) {
      ++it;
      continue;
    }
    unattributed.push_back(it->second);
    it = unreadable.erase(it);
  }

  FlightAnalysis analysis;
  std::vector<std::string> missing_lines;
  for (int r = 0; r < size; ++r) {
    if (ranks.count(r) > 0) continue;
    analysis.missing_ranks.push_back(r);
    auto it = unreadable.find(r);
    missing_lines.push_back(absl::StrCat(
        "rank ", r, ": ", it == unreadable.end() ? "no dump among the files given" : it->second));
  }

  // Lagging: the ranks whose last call is the lowest, or, when all reached
  // the same call, those still in it after others completed it.
  uint64_t lowest = UINT64_MAX;
  uint64_t highest = 0;
  for (const auto& [rank, view] : ranks) {
    lowest = std::min(lowest, view.last_seq);
    highest = std::max(highest, view.last_seq);
  }
  std::string lagging_line;
  if (lowest < highest) {
    std::vector<int> ahead;
    for (const auto& [rank, view] : ranks) {
      (view.last_seq == lowest ? analysis.lagging_ranks : ahead).push_back(rank);
    }
    const char* pronoun = analysis.lagging_ranks.size() == 1 ? "it" : "they";
    lagging_line =
        lowest == 0
            ? absl::StrCat(ranksText(analysis.lagging_ranks), " recorded no collective while ",
                           ranksText(ahead), " went up to call #", highest, "; look at what ",
                           pronoun, " did instead")
            : absl::StrCat(ranksText(analysis.lagging_ranks), " stopped at call #", lowest,
                           " while ", ranksText(ahead), " went on (up to #", highest,
                           "); look at what ", pronoun, " did after call #", lowest);
  } else if (highest > 0) {
    std::vector<int> finished;
    std::vector<int> stuck;
    for (const auto& [rank, view] : ranks) {
      const FlightEntry::State state = view.calls.at(highest)->state;
      if (state == FlightEntry::State::kCompleted) finished.push_back(rank);
      if (state == FlightEntry::State::kScheduled) stuck.push_back(rank);
    }
    if (!finished.empty() && !stuck.empty()) {
      analysis.lagging_ranks = stuck;
      lagging_line = absl::StrCat(ranksText(stuck), " had not finished call #", highest, ", which ",
                                  ranksText(finished), " completed");
    }
  }

  // First divergence: the lowest call two ranks both recorded differently.
  std::set<uint64_t> seqs;
  for (const auto& [rank, view] : ranks) {
    for (const auto& [seq, entry] : view.calls) seqs.insert(seq);
  }
  for (uint64_t seq : seqs) {
    std::map<std::string, std::vector<int>> by_call;
    for (const auto& [rank, view] : ranks) {
      auto it = view.calls.find(seq);
      if (it != view.calls.end()) by_call[callKey(*it->second)].push_back(rank);
    }
    if (by_call.size() < 2) continue;
    std::vector<std::pair<std::string, std::vector<int>>> calls(by_call.begin(), by_call.end());
    std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) {
      if (a.second.size() != b.second.size()) return a.second.size() < b.second.size();
      return a.second.front() < b.second.front();
    });
    analysis.first_divergent_seq = seq;
    analysis.divergence = absl::StrCat(
        "at call #", seq, ": ", absl::StrJoin(calls, ", ", [](std::string* out, const auto& call) {
          absl::StrAppend(out, ranksText(call.second), " called ", call.first);
        }));
    break;
  }

  std::vector<int> present;
  for (const auto& [rank, view] : ranks) present.push_back(rank);
  std::string& report = analysis.report;
  absl::StrAppend(&report, "flight recorder dumps of group '", group, "': ", size, " ranks, ",
                  ranks.size(), " readable ", ranks.size() == 1 ? "dump" : "dumps", "\n");
  for (int r = 0; r < size; ++r) {
    auto it = ranks.find(r);
    if (it == ranks.end()) {
      absl::StrAppend(&report, "  rank ", r, ": no readable dump\n");
      continue;
    }
    const FlightDump& dump = *it->second.dump;
    absl::StrAppend(&report, "  rank ", r, ": ", dump.entries.size(), " entries");
    if (!dump.entries.empty()) {
      const FlightEntry& last = dump.entries.back();
      absl::StrAppend(&report, ", calls #", dump.entries.front().info.seq, "..#", last.info.seq,
                      ", last ", last.info.op, " #", last.info.seq, " ",
                      str(stateName(last.state)));
      if (!last.error.empty()) absl::StrAppend(&report, " (", last.error, ")");
    }
    absl::StrAppend(&report, "\n");
  }
  for (const std::string& reason : unattributed) {
    absl::StrAppend(&report, "  unreadable: ", reason, "\n");
  }
  if (!missing_lines.empty()) {
    absl::StrAppend(&report, "missing: ", absl::StrJoin(missing_lines, "; "), "\n");
  }
  if (!analysis.lagging_ranks.empty()) absl::StrAppend(&report, "lagging: ", lagging_line, "\n");
  if (analysis.first_divergent_seq != 0) {
    absl::StrAppend(&report, "first divergence: ", analysis.divergence, "\n");
  }
  if (analysis.lagging_ranks.empty() && analysis.first_divergent_seq == 0) {
    if (present.size() == 1) {
      absl::StrAppend(&report, "nothing to compare: only rank ", present.front(),
                      " left a readable dump (up to call #", highest, ")\n");
    } else {
      absl::StrAppend(&report, "consistent: ", ranksText(present), " reached call #", highest,
                      " and recorded the same calls");
      if (!analysis.missing_ranks.empty()) {
        absl::StrAppend(
            &report, "; ", ranksText(analysis.missing_ranks), " left no readable dump, so ",
            analysis.missing_ranks.size() == 1 ? "it" : "they", " may have crashed before dumping");
      }
      absl::StrAppend(&report, "\n");
    }
  }
  return analysis;
}

#undef LOOM_ASSIGN_OR_RETURN

}  // namespace loom::comm::debug
