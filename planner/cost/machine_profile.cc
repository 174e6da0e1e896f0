// Loading and lookups of machine profiles (see machine_profile.h).
#include "planner/cost/machine_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace loom::planner::cost {
namespace {

using json = nlohmann::json;

double log2Distance(int64_t a, int64_t b) {
  return std::abs(std::log2(static_cast<double>(a)) - std::log2(static_cast<double>(b)));
}

// Reads one profile, keeping the JSON path of every field for messages.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  absl::Status error(const std::string& path, const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("machine profile ", source_, ": ", path, ": ", what,
                     "; re-measure with //tools:calibrate or fix the file (schema in "
                     "docs/planner_cost.md)"));
  }

  absl::StatusOr<const json*> member(const json& object, const std::string& path,
                                     const char* key) const {
    if (!object.is_object()) return error(path, "expected an object");
    auto it = object.find(key);
    if (it == object.end()) return error(join(path, key), "missing");
    return &*it;
  }

  absl::StatusOr<std::string> string(const json& object, const std::string& path,
                                     const char* key) const {
    absl::StatusOr<const json*> value = member(object, path, key);
    if (!value.ok()) return value.status();
    if (!(*value)->is_string()) {
      return error(join(path, key), absl::StrCat("expected a string, got ", (*value)->dump()));
    }
    return (*value)->get<std::string>();
  }

  absl::StatusOr<std::string> oneOf(const json& object, const std::string& path, const char* key,
                                    const std::vector<std::string>& allowed) const {
    absl::StatusOr<std::string> value = string(object, path, key);
    if (!value.ok()) return value.status();
    for (const std::string& name : allowed) {
      if (*value == name) return value;
    }
    return error(join(path, key), absl::StrCat("expected one of ", absl::StrJoin(allowed, ", "),
                                               ", got \"", *value, "\""));
  }

  absl::StatusOr<int64_t> integer(const json& object, const std::string& path, const char* key,
                                  int64_t minimum) const {
    absl::StatusOr<const json*> value = member(object, path, key);
    if (!value.ok()) return value.status();
    if (!(*value)->is_number_integer() || (*value)->get<int64_t>() < minimum) {
      return error(join(path, key),
                   absl::StrCat("expected an integer >= ", minimum, ", got ", (*value)->dump()));
    }
    return (*value)->get<int64_t>();
  }

  // A number > 0 (or >= 0 when `zero_ok`), finite.
  absl::StatusOr<double> number(const json& object, const std::string& path, const char* key,
                                bool zero_ok = false) const {
    absl::StatusOr<const json*> value = member(object, path, key);
    if (!value.ok()) return value.status();
    const bool ok = (*value)->is_number() && std::isfinite((*value)->get<double>()) &&
                    ((*value)->get<double>() > 0 || (zero_ok && (*value)->get<double>() == 0));
    if (!ok) {
      return error(join(path, key),
                   absl::StrCat("expected a finite number ", zero_ok ? ">= 0" : "> 0", ", got ",
                                (*value)->dump()));
    }
    return (*value)->get<double>();
  }

  absl::StatusOr<const json*> array(const json& object, const std::string& path,
                                    const char* key) const {
    absl::StatusOr<const json*> value = member(object, path, key);
    if (!value.ok()) return value.status();
    if (!(*value)->is_array()) {
      return error(join(path, key), absl::StrCat("expected an array, got ", (*value)->dump()));
    }
    return value;
  }

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? key : absl::StrCat(path, ".", key);
  }

 private:
  std::string source_;
};

#define LOOM_ASSIGN(lhs, expr)                    \
  do {                                            \
    auto value_or = (expr);                       \
    if (!value_or.ok()) return value_or.status(); \
    lhs = *std::move(value_or);                   \
  } while (false)

}  // namespace

ShapeClass shapeClassOf(int64_t m, int64_t n, int64_t k) {
  const int64_t smallest = std::min({m, n, k});
  if (smallest < 256) return ShapeClass::kSmall;
  if (smallest < 2048) return ShapeClass::kMedium;
  return ShapeClass::kLarge;
}

std::string_view shapeClassName(ShapeClass shape_class) {
  switch (shape_class) {
    case ShapeClass::kSmall:
      return "small";
    case ShapeClass::kMedium:
      return "medium";
    case ShapeClass::kLarge:
      return "large";
  }
  return "large";
}

std::string_view linkScopeName(LinkScope scope) {
  return scope == LinkScope::kIntraHost ? "intra_host" : "inter_host";
}

const GemmMeasurement* MachineProfile::gemmFor(std::string_view dtype, int64_t m, int64_t n,
                                               int64_t k) const {
  const ShapeClass shape_class = shapeClassOf(m, n, k);
  const GemmMeasurement* best = nullptr;
  double bestDistance = std::numeric_limits<double>::infinity();
  for (const GemmMeasurement& entry : gemm) {
    if (entry.dtype != dtype || entry.shape_class != shape_class) continue;
    const double distance =
        log2Distance(entry.m, m) + log2Distance(entry.n, n) + log2Distance(entry.k, k);
    if (distance < bestDistance) {
      best = &entry;
      bestDistance = distance;
    }
  }
  return best;
}

const CollectiveMeasurement* MachineProfile::collectiveFor(std::string_view kind, LinkScope scope,
                                                           int64_t group_size,
                                                           std::string_view backend) const {
  bool haveBackend = false;
  for (const CollectiveMeasurement& entry : collectives) {
    if (entry.backend == backend) haveBackend = true;
  }
  const CollectiveMeasurement* best = nullptr;
  double bestDistance = std::numeric_limits<double>::infinity();
  for (const CollectiveMeasurement& entry : collectives) {
    if (entry.kind != kind || entry.link_class != scope) continue;
    if (haveBackend && entry.backend != backend) continue;
    const double distance = log2Distance(entry.group_size, group_size);
    const bool better = distance < bestDistance ||
                        (distance == bestDistance && best && entry.group_size > best->group_size);
    if (better) {
      best = &entry;
      bestDistance = distance;
    }
  }
  return best;
}

absl::StatusOr<MachineProfile> parseMachineProfile(std::string_view text, std::string_view source) {
  const Reader r(source);
  const json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return r.error("(file)", "not valid JSON");
  if (!root.is_object()) return r.error("(file)", "expected a JSON object at the top level");
  MachineProfile profile;
  std::string format;
  LOOM_ASSIGN(format, r.string(root, "", "format"));
  if (format != kMachineProfileFormat) {
    return r.error("format",
                   absl::StrCat("expected \"", kMachineProfileFormat, "\", got \"", format, "\""));
  }
  int64_t version = 0;
  LOOM_ASSIGN(version, r.integer(root, "", "version", 0));
  if (version != kMachineProfileVersion) {
    return r.error("version", absl::StrCat("this reader knows version ", kMachineProfileVersion,
                                           ", got ", version));
  }
  LOOM_ASSIGN(profile.name, r.string(root, "", "name"));
  LOOM_ASSIGN(profile.measured_on, r.string(root, "", "measured_on"));
  LOOM_ASSIGN(profile.date, r.string(root, "", "date"));

  const json* device = nullptr;
  LOOM_ASSIGN(device, r.member(root, "", "device"));
  LOOM_ASSIGN(profile.device_name, r.string(*device, "device", "name"));
  LOOM_ASSIGN(profile.memory_bytes, r.integer(*device, "device", "memory_bytes", 1));
  LOOM_ASSIGN(profile.memory_bandwidth_bytes_per_s,
              r.number(*device, "device", "memory_bandwidth_bytes_per_s"));

  const json* gemm = nullptr;
  LOOM_ASSIGN(gemm, r.array(root, "", "gemm"));
  for (size_t i = 0; i < gemm->size(); ++i) {
    const std::string path = absl::StrCat("gemm[", i, "]");
    const json& entry = (*gemm)[i];
    GemmMeasurement g;
    LOOM_ASSIGN(g.dtype, r.oneOf(entry, path, "dtype", {"f32", "bf16", "f16"}));
    std::string shape;
    LOOM_ASSIGN(shape, r.oneOf(entry, path, "shape_class", {"small", "medium", "large"}));
    LOOM_ASSIGN(g.m, r.integer(entry, path, "m", 1));
    LOOM_ASSIGN(g.n, r.integer(entry, path, "n", 1));
    LOOM_ASSIGN(g.k, r.integer(entry, path, "k", 1));
    LOOM_ASSIGN(g.flops_per_s, r.number(entry, path, "flops_per_s"));
    g.shape_class = shapeClassOf(g.m, g.n, g.k);
    if (shapeClassName(g.shape_class) != shape) {
      return r.error(path + ".shape_class",
                     absl::StrCat("\"", shape, "\" disagrees with m, n, k = ", g.m, ", ", g.n, ", ",
                                  g.k, ": min(m, n, k) = ", std::min({g.m, g.n, g.k}), " is \"",
                                  std::string(shapeClassName(g.shape_class)),
                                  "\" (small < 256 <= medium < 2048 <= large)"));
    }
    profile.gemm.push_back(std::move(g));
  }

  const json* collectives = nullptr;
  LOOM_ASSIGN(collectives, r.array(root, "", "collectives"));
  for (size_t i = 0; i < collectives->size(); ++i) {
    const std::string path = absl::StrCat("collectives[", i, "]");
    const json& entry = (*collectives)[i];
    CollectiveMeasurement c;
    LOOM_ASSIGN(c.backend, r.oneOf(entry, path, "backend", {"gloo", "mpi", "nccl"}));
    LOOM_ASSIGN(c.kind, r.oneOf(entry, path, "kind",
                                {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}));
    LOOM_ASSIGN(c.group_size, r.integer(entry, path, "group_size", 2));
    std::string link;
    LOOM_ASSIGN(link, r.oneOf(entry, path, "link_class", {"intra_host", "inter_host"}));
    c.link_class = link == "intra_host" ? LinkScope::kIntraHost : LinkScope::kInterHost;
    LOOM_ASSIGN(c.latency_s, r.number(entry, path, "latency_s", /*zero_ok=*/true));
    LOOM_ASSIGN(c.bus_bandwidth_bytes_per_s, r.number(entry, path, "bus_bandwidth_bytes_per_s"));
    if (entry.contains("points")) {
      const json* points = nullptr;
      LOOM_ASSIGN(points, r.array(entry, path, "points"));
      for (size_t j = 0; j < points->size(); ++j) {
        const std::string pointPath = absl::StrCat(path, ".points[", j, "]");
        CollectivePoint p;
        LOOM_ASSIGN(p.bytes, r.integer((*points)[j], pointPath, "bytes", 0));
        LOOM_ASSIGN(p.time_s, r.number((*points)[j], pointPath, "time_s"));
        c.points.push_back(p);
      }
    }
    profile.collectives.push_back(std::move(c));
  }
  return profile;
}

absl::StatusOr<MachineProfile> loadMachineProfile(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("cannot read machine profile '", path,
                                            "'; give the JSON file //tools:calibrate wrote"));
  }
  std::stringstream text;
  text << file.rdbuf();
  return parseMachineProfile(text.str(), path);
}

#undef LOOM_ASSIGN

}  // namespace loom::planner::cost
