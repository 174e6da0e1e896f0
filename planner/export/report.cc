// report.md and trace.json from plan.json (see report.h).
#include "planner/export/report.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "planner/transforms/memory/memory_plan.h"

namespace loom::planner::exporter {
namespace {

using nlohmann::json;

std::string joined(const json& array, const char* separator) {
  std::vector<std::string> parts;
  for (const json& entry : array) {
    parts.push_back(entry.is_string() ? entry.get<std::string>() : entry.dump());
  }
  return absl::StrJoin(parts, separator);
}

std::string withCommas(int64_t value) {
  std::string digits = absl::StrCat(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

}  // namespace

std::string formatReport(const json& plan) {
  const json& predicted = plan["predicted"];
  std::string out = absl::StrCat("# Plan: ", plan["model"].get<std::string>(), "\n\n");
  absl::StrAppend(&out, "- mesh: ", joined(plan["mesh"]["shape"], "x"), " (axes ",
                  joined(plan["mesh"]["axes"], ", "), "; strategies ",
                  joined(plan["strategies"], ", "), ")\n");
  const json& topology = plan["topology"];
  absl::StrAppend(&out, "- topology: ", topology["hosts"].get<int64_t>(), " host(s) x ",
                  topology["devices_per_host"].get<int64_t>(), " ",
                  topology["device"]["name"].get<std::string>(), "\n");
  // Gradients may differ from their parameters in type
  // (plan-insert-collectives' grad-reduce-dtype), so both are shown.
  std::set<std::string> param_types, grad_types;
  for (const json& buffer : plan["buffers"]) {
    if (buffer["role"] == "param") param_types.insert(buffer["dtype"].get<std::string>());
    if (buffer["role"] == "grad") grad_types.insert(buffer["dtype"].get<std::string>());
  }
  if (!param_types.empty()) {
    absl::StrAppend(&out, "- dtypes: params ", absl::StrJoin(param_types, ", "));
    if (!grad_types.empty()) absl::StrAppend(&out, "; gradients ", absl::StrJoin(grad_types, ", "));
    out += "\n";
  }
  absl::StrAppend(
      &out,
      absl::StrFormat("- predicted step: %.4f s (compute %.4f s, communication %.4f s of which "
                      "%.4f s exposed, optimizer %.4f s)\n",
                      predicted["step_time_s"].get<double>(), predicted["compute_s"].get<double>(),
                      predicted["comm_s"].get<double>(), predicted["exposed_comm_s"].get<double>(),
                      predicted["optimizer_s"].get<double>()),
      "- peak memory per rank: ", memory::formatBytes(predicted["peak_bytes"].get<int64_t>()),
      " (", withCommas(predicted["peak_bytes"].get<int64_t>()), " bytes)\n\n");

  out += "## Placements\n\n| parameter | global shape | local shape | placement | bytes per rank |\n"
         "| --- | --- | --- | --- | ---: |\n";
  for (const json& buffer : plan["buffers"]) {
    if (buffer["role"] != "param") continue;
    absl::StrAppend(&out, "| ", buffer["name"].get<std::string>(), " | ",
                    joined(buffer["global_shape"], "x"), " | ", joined(buffer["local_shape"], "x"),
                    " | ", joined(buffer["placement"], ", "), " | ",
                    withCommas(buffer["bytes"].get<int64_t>()), " |\n");
  }

  out += "\n## Collectives per step (per rank)\n\n| axes | kind | count | bytes |\n"
         "| --- | --- | ---: | ---: |\n";
  for (const json& entry : predicted["comm_volume"]) {
    absl::StrAppend(&out, "| ", entry["axes"].get<std::string>(), " | ",
                    entry["kind"].get<std::string>(), " | ", entry["count"].get<int64_t>(), " | ",
                    withCommas(entry["bytes"].get<int64_t>()), " |\n");
  }
  absl::StrAppend(&out, "| all | total | | ",
                  withCommas(predicted["comm_bytes_per_rank"].get<int64_t>()), " |\n");

  // Every collective states its wire and accumulation dtypes; the report
  // shows each distinct combination so a bf16-on-the-wire plan is visible.
  std::map<std::string, int64_t> dtype_rows;
  for (const auto& [phase, instructions] : plan["phases"].items()) {
    for (const json& instruction : instructions) {
      const json attrs = instruction.value("attrs", json::object());
      if (!attrs.contains("kind") || !attrs.contains("wire_type")) continue;
      const std::string row = absl::StrCat(
          "| ", joined(attrs.value("mesh_axes", json::array()), ","), " | ",
          attrs["kind"].get<std::string>(), " | ", attrs["wire_type"].get<std::string>(), " | ",
          attrs.contains("accum_type") ? attrs["accum_type"].get<std::string>() : "-", " |");
      ++dtype_rows[row];
    }
  }
  out += "\n## Collective dtypes\n\n| axes | kind | wire | accumulate | count |\n"
         "| --- | --- | --- | --- | ---: |\n";
  for (const auto& [row, count] : dtype_rows) absl::StrAppend(&out, row, " ", count, " |\n");

  out += "\n## Memory at the peak (per rank)\n\n| role | bytes | |\n| --- | ---: | ---: |\n";
  for (const auto& [role, bytes] : predicted["breakdown"].items()) {
    absl::StrAppend(&out, "| ", role, " | ", withCommas(bytes.get<int64_t>()), " | ",
                    memory::formatBytes(bytes.get<int64_t>()), " |\n");
  }
  absl::StrAppend(&out, "| total | ", withCommas(predicted["peak_bytes"].get<int64_t>()), " | ",
                  memory::formatBytes(predicted["peak_bytes"].get<int64_t>()), " |\n");

  out += "\n## Schedule\n\n| phase | instructions | compute | comm | async | start (s) | end (s) |\n"
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    int64_t compute = 0, comm = 0, async = 0;
    double start = -1, end = 0;
    for (const json& instruction : plan["phases"][phase]) {
      (instruction["stream"] == "comm" ? comm : compute) += 1;
      if (instruction["attrs"].contains("async_handle") && instruction["stream"] == "comm") ++async;
      if (!instruction.contains("start_s")) continue;
      const double s = instruction["start_s"].get<double>();
      if (start < 0 || s < start) start = s;
      end = std::max(end, s + instruction["duration_s"].get<double>());
    }
    absl::StrAppend(&out, absl::StrFormat("| %s | %d | %d | %d | %d | %.4f | %.4f |\n", phase,
                                          compute + comm, compute, comm, async,
                                          start < 0 ? 0.0 : start, end));
  }
  return out;
}

json chromeTrace(const json& plan) {
  json events = json::array();
  events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 1}, {"name", "thread_name"},
                    {"args", {{"name", "compute"}}}});
  events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 2}, {"name", "thread_name"},
                    {"args", {{"name", "comm"}}}});
  events.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"},
                    {"args", {{"name", "rank 0 (predicted)"}}}});
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    for (const json& instruction : plan["phases"][phase]) {
      if (!instruction.contains("start_s")) continue;
      const bool comm = instruction["stream"] == "comm";
      json args = {{"phase", phase}, {"index", instruction["index"]}};
      if (comm) {
        args["bytes"] = instruction["attrs"]["bytes"];
        args["axes"] = instruction["attrs"]["mesh_axes"];
      }
      events.push_back({{"ph", "X"},
                        {"pid", 1},
                        {"tid", comm ? 2 : 1},
                        {"name", instruction["op"]},
                        {"cat", phase},
                        {"ts", instruction["start_s"].get<double>() * 1e6},
                        {"dur", instruction["duration_s"].get<double>() * 1e6},
                        {"args", args}});
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace loom::planner::exporter
