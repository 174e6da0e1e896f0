// comm-flight-analyze: reads the flight recorder dumps of one process group
// (every rank's, or whichever survived) and names the lagging ranks and the
// first call where the ranks diverged.
//
//   comm-flight-analyze [--group=NAME] DUMP_OR_DIRECTORY...
//
// Exit status: 0 when the dumps agree, 1 when a rank lags or the ranks
// diverged, 2 on bad input.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/debug/flight_recorder.h"

namespace {

constexpr char kUsage[] =
    "usage: comm-flight-analyze [--group=NAME] DUMP_OR_DIRECTORY...\n"
    "Reads flight recorder dumps (LOOM_FLIGHT_RECORDER_DIR/<group>_rank<r>.json) of one\n"
    "process group and names the lagging ranks and the first call where ranks diverged.\n"
    "A directory stands for its *.json files; --group=NAME keeps only that group's.\n"
    "Exit status: 0 consistent, 1 lagging rank or divergence found, 2 bad input.\n";

int badInput(const std::string& message) {
  std::fprintf(stderr, "comm-flight-analyze: %s\n", message.c_str());
  return 2;
}

// Whether `name` is a dump file name of `group` (any rank).
bool isDumpOf(const std::string& name, const std::string& group) {
  const std::string example = loom::comm::debug::flightDumpFileName(group, 0);
  const std::string prefix = example.substr(0, example.size() - std::strlen("0.json"));
  if (name.size() <= prefix.size() + std::strlen(".json") || name.rfind(prefix, 0) != 0) {
    return false;
  }
  const std::string_view digits(name.data() + prefix.size(),
                                name.size() - prefix.size() - std::strlen(".json"));
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<std::string> group;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg.rfind("--group=", 0) == 0) {
      group = arg.substr(std::strlen("--group="));
    } else if (arg.rfind("-", 0) == 0) {
      std::fputs(kUsage, stderr);
      return badInput("unknown option '" + arg + "'");
    } else {
      args.push_back(arg);
    }
  }
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return badInput("no dumps given");
  }

  std::vector<std::string> paths;
  for (const std::string& arg : args) {
    std::error_code error;
    if (!std::filesystem::is_directory(arg, error)) {
      // Files are passed on even when absent: the analysis reports them as
      // missing ranks.
      paths.push_back(arg);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(arg, error)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_regular_file() || !name.ends_with(".json")) continue;
      if (group && !isDumpOf(name, *group)) continue;
      found.push_back(entry.path().string());
    }
    if (error) return badInput("cannot list " + arg + ": " + error.message());
    if (found.empty()) {
      return badInput("no " +
                      (group ? "dumps of group '" + *group + "'" : std::string("*.json dumps")) +
                      " in " + arg);
    }
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }

  absl::StatusOr<loom::comm::debug::FlightAnalysis> analysis =
      loom::comm::debug::analyzeFlightDumps(paths);
  if (!analysis.ok()) {
    std::string message(analysis.status().message());
    if (message.find("different groups") != std::string::npos && !group) {
      message += " (with a directory, pass --group=NAME)";
    }
    return badInput(message);
  }
  std::fputs(analysis->report.c_str(), stdout);
  return analysis->lagging_ranks.empty() && analysis->first_divergent_seq == 0 ? 0 : 1;
}
