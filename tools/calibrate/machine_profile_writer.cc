// Validation and JSON output of the machine profile (machine_profile_writer.h).
#include "tools/calibrate/machine_profile_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace loom::calibrate {
namespace {

using nlohmann::json;

absl::Status invalid(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("machine profile: ", std::string(where), ": ", std::string(what)));
}

bool oneOf(const std::string& value, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed) {
    if (value == a) return true;
  }
  return false;
}

bool isDate(const std::string& date) {
  if (date.size() != 10 || date[4] != '-' || date[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(date[i]))) return false;
  }
  return true;
}

bool positive(double value) { return value > 0 && std::isfinite(value); }

}  // namespace

std::string_view shapeClass(int64_t m, int64_t n, int64_t k) {
  const int64_t smallest = std::min({m, n, k});
  if (smallest < 256) return "small";
  if (smallest < 2048) return "medium";
  return "large";
}

absl::Status validateProfile(const MachineProfile& p) {
  if (p.name.empty()) return invalid("name", "is empty; pass --name");
  if (p.measured_on.empty()) return invalid("measured_on", "is empty");
  if (!isDate(p.date)) {
    return invalid("date", absl::StrCat("'", p.date, "' is not YYYY-MM-DD"));
  }
  if (p.device.name.empty()) return invalid("device.name", "is empty");
  if (p.device.memory_bytes <= 0) {
    return invalid("device.memory_bytes", absl::StrCat(p.device.memory_bytes, " must be > 0"));
  }
  if (!positive(p.device.memory_bandwidth_bytes_per_s)) {
    return invalid("device.memory_bandwidth_bytes_per_s",
                   absl::StrFormat("%g must be > 0", p.device.memory_bandwidth_bytes_per_s));
  }
  if (p.gemm.empty()) return invalid("gemm", "has no entry; measure at least one GEMM shape");
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> gemms;
  for (size_t i = 0; i < p.gemm.size(); ++i) {
    const ProfileGemm& g = p.gemm[i];
    const std::string where = absl::StrCat("gemm[", i, "]");
    if (!oneOf(g.dtype, {"f32", "bf16", "f16"})) {
      return invalid(where, absl::StrCat("dtype '", g.dtype, "' is not f32, bf16 or f16"));
    }
    if (g.m <= 0 || g.n <= 0 || g.k <= 0) {
      return invalid(where, absl::StrCat("shape ", g.m, "x", g.n, "x", g.k, " must be positive"));
    }
    if (g.shape_class != shapeClass(g.m, g.n, g.k)) {
      return invalid(where, absl::StrCat("shape_class '", g.shape_class, "' but ", g.m, "x", g.n,
                                         "x", g.k, " is ", std::string(shapeClass(g.m, g.n, g.k))));
    }
    if (!positive(g.flops_per_s)) {
      return invalid(where, absl::StrFormat("flops_per_s %g must be > 0", g.flops_per_s));
    }
    if (!gemms.insert({g.dtype, g.m, g.n, g.k}).second) {
      return invalid(where, absl::StrCat("duplicates ", g.dtype, " ", g.m, "x", g.n, "x", g.k));
    }
  }
  std::set<std::tuple<std::string, std::string, int, std::string>> collectives;
  for (size_t i = 0; i < p.collectives.size(); ++i) {
    const ProfileCollective& c = p.collectives[i];
    const std::string where = absl::StrCat("collectives[", i, "]");
    if (!oneOf(c.backend, {"gloo", "mpi", "nccl"})) {
      return invalid(where, absl::StrCat("backend '", c.backend, "' is not gloo, mpi or nccl"));
    }
    if (!oneOf(c.kind, {"all_reduce", "all_gather", "reduce_scatter", "broadcast"})) {
      return invalid(where, absl::StrCat("kind '", c.kind,
                                         "' is not all_reduce, all_gather, reduce_scatter or "
                                         "broadcast"));
    }
    if (c.group_size < 2) {
      return invalid(where, absl::StrCat("group_size ", c.group_size, " must be >= 2"));
    }
    if (!oneOf(c.link_class, {"intra_host", "inter_host"})) {
      return invalid(
          where, absl::StrCat("link_class '", c.link_class, "' is not intra_host or inter_host"));
    }
    if (!(c.latency_s >= 0) || !std::isfinite(c.latency_s)) {
      return invalid(where, absl::StrFormat("latency_s %g must be >= 0", c.latency_s));
    }
    if (!positive(c.bus_bandwidth_bytes_per_s)) {
      return invalid(where, absl::StrFormat("bus_bandwidth_bytes_per_s %g must be > 0",
                                            c.bus_bandwidth_bytes_per_s));
    }
    if (c.points.empty()) return invalid(where, "has no measured points");
    for (size_t j = 0; j < c.points.size(); ++j) {
      if (c.points[j].bytes <= 0 || !positive(c.points[j].time_s)) {
        return invalid(absl::StrCat(where, ".points[", j, "]"),
                       absl::StrFormat("(%d bytes, %g s) needs bytes > 0 and time_s > 0",
                                       c.points[j].bytes, c.points[j].time_s));
      }
    }
    if (!collectives.insert({c.backend, c.kind, c.group_size, c.link_class}).second) {
      return invalid(where, absl::StrCat("duplicates ", c.backend, " ", c.kind, " over ",
                                         c.group_size, " ranks ", c.link_class));
    }
  }
  return absl::OkStatus();
}

json profileToJson(const MachineProfile& p) {
  json gemm = json::array();
  for (const ProfileGemm& g : p.gemm) {
    gemm.push_back({{"dtype", g.dtype},
                    {"shape_class", g.shape_class},
                    {"m", g.m},
                    {"n", g.n},
                    {"k", g.k},
                    {"flops_per_s", g.flops_per_s}});
  }
  json collectives = json::array();
  for (const ProfileCollective& c : p.collectives) {
    json points = json::array();
    for (const ProfilePoint& point : c.points) {
      points.push_back({{"bytes", point.bytes}, {"time_s", point.time_s}});
    }
    collectives.push_back({{"backend", c.backend},
                           {"kind", c.kind},
                           {"group_size", c.group_size},
                           {"link_class", c.link_class},
                           {"latency_s", c.latency_s},
                           {"bus_bandwidth_bytes_per_s", c.bus_bandwidth_bytes_per_s},
                           {"points", points}});
  }
  return {{"format", kProfileFormat},
          {"version", kProfileVersion},
          {"name", p.name},
          {"measured_on", p.measured_on},
          {"date", p.date},
          {"device",
           {{"name", p.device.name},
            {"memory_bytes", p.device.memory_bytes},
            {"memory_bandwidth_bytes_per_s", p.device.memory_bandwidth_bytes_per_s}}},
          {"gemm", gemm},
          {"collectives", collectives}};
}

absl::Status writeProfile(const MachineProfile& profile, const std::string& path) {
  if (absl::Status s = validateProfile(profile); !s.ok()) return s;
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << profileToJson(profile).dump(2) << "\n";
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write the profile to '", tmp,
                                                 "'; check that its folder exists "
                                                 "and is writable (--out)"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("cannot rename '", tmp, "' to '", path, "': ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace loom::calibrate
