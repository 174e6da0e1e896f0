// HTML pages of a plan and of a mesh search, drawn in inline SVG
// (see visual_report.h).
#include "planner/export/visual_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/html/svg_page.h"

namespace loom::planner::visual {
namespace {

// The shared page pieces (tools/html/svg_page.h).
using html::card;
using html::commColor;
using html::esc;
using html::formatBytes;
using html::formatSeconds;
using html::kPageClose;
using html::line;
using html::niceStep;
using html::pageOpen;
using html::phaseColor;
using html::px;
using html::rect;
using html::svgOpen;
using html::swatch;
using html::text;

// The timeline's lane of the copies between device and host memory (no
// mesh axes are named so).
constexpr char kHostCopyLane[] = "(host)";

// ---------------------------------------------------------------------------
// Colours.

constexpr const char* kAxisColors[] = {"#d62728", "#1f77b4", "#2ca02c",
                                       "#9467bd", "#ff7f0e", "#8c564b"};
constexpr const char* kHostTones[] = {"#dbe7f3", "#fde5cc", "#dcefd9",
                                      "#f3dcec", "#fff2c2", "#e4e0f4"};

std::string roleColor(std::string_view role) {
  if (role == "param") return "#4e79a7";
  if (role == "grad") return "#f28e2b";
  if (role == "optimizer_state") return "#e15759";
  if (role == "activation") return "#76b7b2";
  if (role == "gathered") return "#59a14f";
  return "#bab0ac";
}


constexpr char kWaitColor[] = "#ff6b6b";


// ---------------------------------------------------------------------------
// What the page draws, taken from the typed plan.

struct Instruction {
  std::string op;
  std::string phase;
  bool comm = false;
  bool timed = false;
  double start_s = 0;
  double duration_s = 0;
  std::string kind;  // collectives: attrs.kind
  int64_t bytes = 0;
  std::string axes;
};

struct VolumeEntry {
  std::string axes;
  std::string kind;
  int64_t count = 0;
  int64_t bytes = 0;
};

struct PageModel {
  std::string model;
  std::string function;
  std::vector<int64_t> shape;
  std::vector<std::string> axes;
  std::vector<std::string> strategies;
  int64_t hosts = 1;
  int64_t devices_per_host = 1;
  std::string device_name;
  int64_t device_memory_bytes = 0;
  double step_time_s = 0;
  double compute_s = 0;
  double comm_s = 0;
  double exposed_comm_s = 0;
  double optimizer_s = 0;
  int64_t peak_bytes = 0;
  int64_t comm_bytes_per_rank = 0;
  std::vector<std::pair<std::string, int64_t>> breakdown;
  std::map<std::string, int64_t> buffer_bytes_by_role;
  std::map<std::string, int64_t> buffer_count_by_role;
  std::vector<Instruction> instructions;
  std::vector<VolumeEntry> comm_volume;
  int64_t world = 1;
};

// Roles in the order bars stack them; unknown roles follow, sorted.
std::vector<std::string> roleOrder(const std::set<std::string>& present) {
  std::vector<std::string> order;
  for (const char* role : {"param", "grad", "optimizer_state", "gathered", "activation"}) {
    if (present.count(role)) order.push_back(role);
  }
  for (const std::string& role : present) {
    if (std::find(order.begin(), order.end(), role) == order.end()) order.push_back(role);
  }
  return order;
}

// One rect each is still a page a browser opens quickly.
constexpr int64_t kMaxDevices = 65536;

absl::StatusOr<PageModel> modelOf(const plan::Plan& plan) {
  if (plan.worldSize() > kMaxDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat(plan.source, ": $.mesh.shape: ", plan.worldSize(),
                     " devices are more than the page draws (", kMaxDevices,
                     "); plan-html draws meshes of up to that many"));
  }
  PageModel p;
  p.model = plan.model;
  p.function = plan.function;
  p.shape = plan.mesh.shape();
  p.axes = plan.mesh.axisNames();
  p.strategies = plan.strategies;
  p.world = plan.worldSize();
  p.hosts = plan.topology.hosts;
  p.devices_per_host = plan.topology.devices_per_host;
  p.device_name = plan.topology.device;
  p.device_memory_bytes = plan.topology.memory_bytes;
  const plan::Predicted& predicted = plan.predicted;
  p.step_time_s = predicted.step_time_s;
  p.compute_s = predicted.compute_s;
  p.comm_s = predicted.comm_s;
  p.exposed_comm_s = predicted.exposed_comm_s;
  p.optimizer_s = predicted.optimizer_s;
  p.peak_bytes = predicted.peak_bytes;
  p.comm_bytes_per_rank = predicted.comm_bytes_per_rank;
  p.breakdown.assign(predicted.breakdown.begin(), predicted.breakdown.end());
  for (const plan::CommVolume& v : predicted.comm_volume) {
    p.comm_volume.push_back({v.axes, v.kind, v.count, v.bytes});
  }
  for (const plan::Buffer& b : plan.buffers) {
    p.buffer_bytes_by_role[plan::roleName(b.role)] += b.bytes;
    ++p.buffer_count_by_role[plan::roleName(b.role)];
  }
  for (const plan::Instruction* in : plan.programs.front().instructions()) {
    Instruction ins;
    ins.op = in->op;
    ins.phase = plan::phaseName(in->phase);
    // Offload's copies get a lane of their own, as the copy stream they run on.
    const bool copy = in->info->stream == plan::Stream::kCopy;
    ins.comm = in->commStream() || copy;
    ins.timed = in->start_s.has_value();
    ins.start_s = in->start_s.value_or(0);
    ins.duration_s = in->duration_s.value_or(0);
    if (ins.comm) {
      ins.kind = copy ? "host copy" : plan::collectiveKindName(in->info->collective);
      ins.bytes = in->attrs.bytes.value_or(0);
      ins.axes = copy ? kHostCopyLane : absl::StrJoin(in->attrs.mesh_axes, ",");
    }
    p.instructions.push_back(std::move(ins));
  }
  return p;
}

// ---------------------------------------------------------------------------
// The mesh.

struct MeshLayout {
  double pitch = 0;
  double cell = 0;
  std::vector<double> x, y;  // top-left corner of each rank's cell
  double width = 0, height = 0;
  std::vector<size_t> horizontal;  // axes laid out left to right, innermost first
  std::vector<size_t> vertical;    // axes laid out top to bottom, innermost first
  std::vector<std::vector<int64_t>> coords;
};

// The last axis runs left to right, the one before it top to bottom, and
// further axes alternate, each repeating the block of the axes inside it
// with a gap, so every group of an axis lies on one line.
MeshLayout layoutMesh(const PageModel& p, double left, double top, double max_width,
                      double max_height) {
  MeshLayout l;
  const size_t n = p.shape.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t d = n - 1 - i;
    (i % 2 == 0 ? l.horizontal : l.vertical).push_back(d);
  }
  constexpr double kGap = 0.6;  // between blocks, in pitches
  std::vector<double> stride(n, 0);
  auto strides = [&](const std::vector<size_t>& dims) {
    double s = 1, extent = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      stride[dims[i]] = s;
      extent = (p.shape[dims[i]] - 1) * s + (i == 0 ? 1 : extent);
      s = extent + kGap;
    }
    return dims.empty() ? 1.0 : extent;
  };
  const double units_w = strides(l.horizontal);
  const double units_h = strides(l.vertical);
  l.pitch = std::clamp(std::min(max_width / units_w, max_height / units_h), 5.0, 64.0);
  l.cell = l.pitch * 0.82;
  l.width = units_w * l.pitch;
  l.height = units_h * l.pitch;
  l.coords.resize(p.world);
  for (int64_t r = 0; r < p.world; ++r) {
    std::vector<int64_t> c(n);
    int64_t rest = r;
    for (size_t d = n; d-- > 0;) {
      c[d] = rest % p.shape[d];
      rest /= p.shape[d];
    }
    double ux = 0, uy = 0;
    for (size_t d : l.horizontal) ux += c[d] * stride[d];
    for (size_t d : l.vertical) uy += c[d] * stride[d];
    l.x.push_back(left + ux * l.pitch);
    l.y.push_back(top + uy * l.pitch);
    l.coords[r] = std::move(c);
  }
  return l;
}

// The ranks of each group along `axis`: ranks that differ only in it.
std::vector<std::vector<int64_t>> groupsAlong(const PageModel& p, const MeshLayout& l,
                                              size_t axis) {
  std::map<std::vector<int64_t>, std::vector<int64_t>> groups;
  for (int64_t r = 0; r < p.world; ++r) {
    std::vector<int64_t> key = l.coords[r];
    key[axis] = -1;
    groups[key].push_back(r);
  }
  std::vector<std::vector<int64_t>> out;
  for (auto& [key, ranks] : groups) out.push_back(std::move(ranks));
  std::sort(out.begin(), out.end());
  return out;
}

std::string commSummary(const PageModel& p, const std::string& axes) {
  std::vector<std::string> parts;
  for (const VolumeEntry& v : p.comm_volume) {
    if (v.axes != axes) continue;
    parts.push_back(absl::StrCat(v.kind, " \u00d7", v.count, " (", formatBytes(v.bytes), "/rank)"));
  }
  return parts.empty() ? "no collectives" : absl::StrJoin(parts, ", ");
}

// "fsdp=2 \u00d7 tp=2".
std::string meshName(const PageModel& p) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    parts.push_back(absl::StrCat(p.axes[i], "=", p.shape[i]));
  }
  return absl::StrJoin(parts, " \u00d7 ");
}

std::string meshSection(const PageModel& p) {
  constexpr double kLeft = 96, kTop = 58;
  const MeshLayout l = layoutMesh(p, kLeft, kTop, 820, 520);
  const double width = std::max(kLeft + l.width + 40, 420.0);
  const double height = kTop + l.height + 36;
  const bool dense = p.world > 64;
  std::string svg = svgOpen(width, height, "device mesh");

  // Devices, shaded by host.
  for (int64_t r = 0; r < p.world; ++r) {
    const int64_t host = r / p.devices_per_host;
    std::vector<std::string> coords;
    for (size_t d = 0; d < p.axes.size(); ++d) {
      coords.push_back(absl::StrCat(p.axes[d], "=", l.coords[r][d]));
    }
    svg += rect(
        l.x[r], l.y[r], l.cell, l.cell,
        absl::StrCat("class=\"device\" rx=\"", px(std::min(4.0, l.cell / 6)), "\" fill=\"",
                     kHostTones[host % 6], "\" stroke=\"#5b6570\" stroke-width=\"0.8\""),
        absl::StrCat("rank ", r, " \u00b7 host ", host, " \u00b7 ", absl::StrJoin(coords, ", ")));
    if (l.cell >= 16) {
      svg += text(l.x[r] + l.cell / 2, l.y[r] + l.cell / 2 + std::min(l.cell * 0.36, 13.0) / 3,
                  absl::StrCat(r),
                  absl::StrFormat("text-anchor=\"middle\" font-size=\"%.0f\"",
                                  std::min(l.cell * 0.36, 13.0)));
    }
  }

  // Hosts whose devices form a rectangle get a dashed outline and a name.
  if (p.hosts > 1 && p.hosts <= 64) {
    for (int64_t h = 0; h * p.devices_per_host < p.world; ++h) {
      double x0 = 1e18, y0 = 1e18, x1 = -1e18, y1 = -1e18;
      const int64_t first = h * p.devices_per_host;
      const int64_t last = std::min(p.world, first + p.devices_per_host);
      for (int64_t r = first; r < last; ++r) {
        x0 = std::min(x0, l.x[r]);
        y0 = std::min(y0, l.y[r]);
        x1 = std::max(x1, l.x[r]);
        y1 = std::max(y1, l.y[r]);
      }
      int64_t inside = 0;
      for (int64_t r = 0; r < p.world; ++r) {
        if (l.x[r] >= x0 && l.x[r] <= x1 && l.y[r] >= y0 && l.y[r] <= y1) ++inside;
      }
      if (inside != last - first) continue;
      const double pad = (l.pitch - l.cell) * 0.5;
      svg += rect(x0 - pad, y0 - pad, x1 - x0 + l.cell + 2 * pad, y1 - y0 + l.cell + 2 * pad,
                  "fill=\"none\" stroke=\"#666\" stroke-dasharray=\"4 3\" stroke-width=\"1\"",
                  absl::StrCat("host ", h));
    }
  }

  // Groups: outlines along the two innermost axes (their groups are
  // contiguous), lines through the members along outer ones. Dense meshes
  // show rank 0's group of each axis only.
  std::string legend;
  for (size_t k = 0; k < p.axes.size(); ++k) {
    const size_t axis = k;
    const char* color = kAxisColors[axis % 6];
    const bool inner_h = !l.horizontal.empty() && l.horizontal[0] == axis;
    const bool inner_v = !l.vertical.empty() && l.vertical[0] == axis;
    const std::vector<std::vector<int64_t>> groups = groupsAlong(p, l, axis);
    const size_t shown = dense ? 1 : groups.size();
    for (size_t g = 0; g < shown; ++g) {
      const std::vector<int64_t>& members = groups[g];
      const std::string tip =
          absl::StrCat(p.axes[axis], " group ", g, ": ranks ", absl::StrJoin(members, ", "));
      if (inner_h || inner_v) {
        const double inset = inner_h ? 0.04 * l.pitch + 1 : 0.10 * l.pitch + 2.5;
        double x0 = 1e18, y0 = 1e18, x1 = -1e18, y1 = -1e18;
        for (int64_t r : members) {
          x0 = std::min(x0, l.x[r]);
          y0 = std::min(y0, l.y[r]);
          x1 = std::max(x1, l.x[r] + l.cell);
          y1 = std::max(y1, l.y[r] + l.cell);
        }
        svg += rect(x0 - inset, y0 - inset, x1 - x0 + 2 * inset, y1 - y0 + 2 * inset,
                    absl::StrCat("class=\"group\" fill=\"none\" rx=\"", px(inset + 2),
                                 "\" stroke=\"", color, "\" stroke-width=\"", dense ? "2.2" : "1.8",
                                 "\"", inner_v ? " stroke-dasharray=\"6 3\"" : ""),
                    tip);
      } else {
        const bool along_x =
            std::find(l.horizontal.begin(), l.horizontal.end(), axis) != l.horizontal.end();
        const double offset = l.cell * (0.25 + 0.1 * (axis % 3));
        std::string points;
        for (int64_t r : members) {
          const double cx = l.x[r] + (along_x ? l.cell / 2 : offset);
          const double cy = l.y[r] + (along_x ? offset : l.cell / 2);
          absl::StrAppend(&points, px(cx), ",", px(cy), " ");
        }
        svg += absl::StrCat("<polyline class=\"group\" points=\"", points,
                            "\" fill=\"none\" stroke=\"", color,
                            "\" stroke-width=\"1.6\" stroke-dasharray=\"2 2\"><title>", esc(tip),
                            "</title></polyline>\n");
        for (int64_t r : members) {
          const double cx = l.x[r] + (along_x ? l.cell / 2 : offset);
          const double cy = l.y[r] + (along_x ? offset : l.cell / 2);
          svg += absl::StrCat("<circle cx=\"", px(cx), "\" cy=\"", px(cy), "\" r=\"",
                              px(std::max(1.5, l.cell * 0.06)), "\" fill=\"", color, "\"/>\n");
        }
      }
    }
    const std::string strategy = axis < p.strategies.size() ? p.strategies[axis] : "";
    absl::StrAppend(
        &legend, "<span class=\"item\">",
        swatch("#fff", absl::StrCat("border:2px ", inner_v ? "dashed " : "solid ", color)), "<b>",
        esc(p.axes[axis]), "</b> \u00b7 size ", p.shape[axis],
        strategy.empty() ? "" : absl::StrCat(" \u00b7 ", esc(strategy)), " \u00b7 ", groups.size(),
        " group", groups.size() == 1 ? "" : "s", " of ", p.shape[axis], " \u00b7 ",
        esc(commSummary(p, p.axes[axis])), "</span>\n");
  }

  // Axis labels.
  if (!l.horizontal.empty()) {
    const size_t a = l.horizontal[0];
    svg += text(
        kLeft, kTop - 30, absl::StrCat(p.axes[a], " (", p.shape[a], ") \u2192"),
        absl::StrCat("font-size=\"13\" font-weight=\"600\" fill=\"", kAxisColors[a % 6], "\""));
    if (l.cell >= 14) {
      for (int64_t i = 0; i < p.shape[a]; ++i) {
        svg += text(l.x[0] + i * l.pitch + l.cell / 2, kTop - 12, absl::StrCat(i),
                    "text-anchor=\"middle\" font-size=\"11\" fill=\"#777\"");
      }
    }
  }
  if (!l.vertical.empty()) {
    const size_t a = l.vertical[0];
    svg += text(kLeft - 40, kTop + std::min(l.height, 200.0) / 2,
                absl::StrCat(p.axes[a], " (", p.shape[a], ") \u2193"),
                absl::StrCat("text-anchor=\"middle\" font-size=\"13\" font-weight=\"600\" fill=\"",
                             kAxisColors[a % 6], "\" transform=\"rotate(-90 ", px(kLeft - 40), " ",
                             px(kTop + std::min(l.height, 200.0) / 2), ")\""));
    if (l.cell >= 14) {
      for (int64_t i = 0; i < p.shape[a]; ++i) {
        svg += text(kLeft - 12, l.y[0] + i * l.pitch + l.cell / 2 + 4, absl::StrCat(i),
                    "text-anchor=\"end\" font-size=\"11\" fill=\"#777\"");
      }
    }
  }
  std::vector<std::string> outer;
  for (size_t i = 1; i < l.horizontal.size(); ++i) {
    outer.push_back(
        absl::StrCat(p.axes[l.horizontal[i]], " (", p.shape[l.horizontal[i]], "): blocks \u2192"));
  }
  for (size_t i = 1; i < l.vertical.size(); ++i) {
    outer.push_back(
        absl::StrCat(p.axes[l.vertical[i]], " (", p.shape[l.vertical[i]], "): blocks \u2193"));
  }
  if (!outer.empty()) {
    svg +=
        text(kLeft + 160, kTop - 30, absl::StrJoin(outer, "   "), "font-size=\"12\" fill=\"#555\"");
  }
  svg += "</svg>\n";

  std::string hosts_note = absl::StrCat(
      "<span class=\"item\">", swatch(kHostTones[0]), swatch(kHostTones[1]), "hosts: ", p.hosts,
      " \u00d7 ", p.devices_per_host, " ", esc(p.device_name), " (fill colour per host",
      p.hosts > 1 && p.hosts <= 64 ? ", dashed outline" : "", ")</span>\n");
  std::string multi;
  std::set<std::string> single(p.axes.begin(), p.axes.end());
  for (const VolumeEntry& v : p.comm_volume) {
    if (single.count(v.axes)) continue;
    absl::StrAppend(&multi, "<span class=\"item\"><b>", esc(v.axes), "</b> (axes together) \u00b7 ",
                    esc(v.kind), " \u00d7", v.count, " (", esc(formatBytes(v.bytes)),
                    "/rank)</span>\n");
  }
  return absl::StrCat(
      "<section>\n<h2>Mesh ", esc(meshName(p)), ": ", p.world, " device", p.world == 1 ? "" : "s",
      "</h2>\n", svg, "<div class=\"legend\">\n", legend, multi, hosts_note, "</div>\n",
      "<p class=\"note\">Rank numbers are row-major over the mesh axes (",
      esc(absl::StrJoin(p.axes, ", ")),
      "). Solid outlines: groups along the innermost axis; dashed: the next one; dotted lines "
      "join the members of groups along outer axes.",
      dense ? " The mesh is large, so only rank 0's group of each axis is drawn." : "",
      " Hover a device or group for its ranks.</p>\n</section>\n");
}

// ---------------------------------------------------------------------------
// Memory.

std::string stackedBar(double x, double y, double width, double height,
                       const std::vector<std::pair<std::string, int64_t>>& parts, double scale,
                       std::string_view what) {
  std::string svg;
  double at = x;
  for (const auto& [role, bytes] : parts) {
    if (bytes <= 0) continue;
    const double w = width * static_cast<double>(bytes) / scale;
    svg += rect(at, y, w, height,
                absl::StrCat("class=\"segment\" fill=\"", roleColor(role),
                             "\" stroke=\"#fff\" stroke-width=\"1\""),
                absl::StrCat(role, ": ", formatBytes(bytes), " (", std::string(what), ")"));
    const std::string label = absl::StrCat(role, " ", formatBytes(bytes));
    if (w > 7.0 * label.size() + 10) {
      svg += text(at + w / 2, y + height / 2 + 4, label,
                  "text-anchor=\"middle\" font-size=\"12\" fill=\"#fff\"");
    } else if (w > 6.5 * role.size() + 10) {
      svg += text(at + w / 2, y + height / 2 + 4, role,
                  "text-anchor=\"middle\" font-size=\"11\" fill=\"#fff\"");
    }
    at += w;
  }
  return svg;
}

std::string memorySection(const PageModel& p) {
  constexpr double kLeft = 150, kWidth = 760, kBar = 34;
  std::set<std::string> roles;
  for (const auto& [role, bytes] : p.breakdown) roles.insert(role);
  for (const auto& [role, bytes] : p.buffer_bytes_by_role) roles.insert(role);
  const std::vector<std::string> order = roleOrder(roles);
  std::map<std::string, int64_t> at_peak(p.breakdown.begin(), p.breakdown.end());
  std::vector<std::pair<std::string, int64_t>> peak_parts, all_parts;
  int64_t all_total = 0;
  for (const std::string& role : order) {
    peak_parts.push_back({role, at_peak.count(role) ? at_peak[role] : 0});
    const int64_t all = p.buffer_bytes_by_role.count(role) ? p.buffer_bytes_by_role.at(role) : 0;
    all_parts.push_back({role, all});
    all_total += all;
  }
  int64_t breakdown_total = 0;
  for (const auto& [role, bytes] : p.breakdown) breakdown_total += bytes;
  const double peak = static_cast<double>(std::max(p.peak_bytes, breakdown_total));
  const double limit = static_cast<double>(p.device_memory_bytes);
  const bool limit_on_scale = limit > 0 && peak >= 0.05 * limit;
  const double peak_scale = std::max(1.0, limit_on_scale ? std::max(peak, limit) * 1.02 : peak);

  std::string svg = svgOpen(kLeft + kWidth + 60, 150, "memory per rank by role");
  svg += text(kLeft - 10, 40, "at the peak",
              "text-anchor=\"end\" font-size=\"13\" font-weight=\"600\"");
  svg +=
      text(kLeft - 10, 56, formatBytes(peak), "text-anchor=\"end\" font-size=\"12\" fill=\"#666\"");
  svg += rect(kLeft, 26, kWidth, kBar, "fill=\"#f0f2f5\"");
  svg += stackedBar(kLeft, 26, kWidth, kBar, peak_parts, peak_scale, "live at the peak");
  if (limit_on_scale) {
    const double lx = kLeft + kWidth * limit / peak_scale;
    svg += line(lx, 14, lx, 26 + kBar + 8,
                "stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"5 3\"");
    svg += text(lx, 11, absl::StrCat("device memory ", formatBytes(limit)),
                "text-anchor=\"end\" font-size=\"11\" fill=\"#d62728\" fill=\"#d62728\"");
  } else if (limit > 0) {
    svg += text(kLeft + kWidth, 16,
                absl::StrFormat("device memory %s is off the scale (the peak is %.2g%% of it)",
                                formatBytes(limit), 100 * peak / limit),
                "text-anchor=\"end\" font-size=\"11\" fill=\"#666\"");
  }
  svg += text(kLeft - 10, 108, "all buffers",
              "text-anchor=\"end\" font-size=\"13\" font-weight=\"600\"");
  svg += text(kLeft - 10, 124, formatBytes(static_cast<double>(all_total)),
              "text-anchor=\"end\" font-size=\"12\" fill=\"#666\"");
  svg += rect(kLeft, 94, kWidth, kBar, "fill=\"#f0f2f5\"");
  svg +=
      stackedBar(kLeft, 94, kWidth, kBar, all_parts, std::max(1.0, static_cast<double>(all_total)),
                 "all buffers of the role, summed over the step");
  svg += "</svg>\n";

  std::string rows;
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t pk = peak_parts[i].second;
    absl::StrAppend(
        &rows, "<tr><td>", swatch(roleColor(order[i])), esc(order[i]), "</td><td class=\"n\">",
        esc(formatBytes(pk)), "</td><td class=\"n\">",
        absl::StrFormat("%.1f%%", peak > 0 ? 100.0 * pk / peak : 0.0), "</td><td class=\"n\">",
        esc(formatBytes(all_parts[i].second)), "</td><td class=\"n\">",
        p.buffer_count_by_role.count(order[i]) ? p.buffer_count_by_role.at(order[i]) : 0,
        "</td></tr>\n");
  }
  return absl::StrCat(
      "<section>\n<h2>Memory per rank</h2>\n", svg,
      "<table>\n<tr><th>role</th><th class=\"n\">at the peak</th><th class=\"n\">share</th>"
      "<th class=\"n\">all buffers</th><th class=\"n\">buffers</th></tr>\n",
      rows,
      "</table>\n<p class=\"note\">The top bar is predicted.breakdown: bytes live at the "
      "peak. The bottom bar sums every buffer of each role over the whole step, which are "
      "not all live at once.</p>\n</section>\n");
}

// ---------------------------------------------------------------------------
// Timeline.


std::string timelineSection(const PageModel& p) {
  constexpr double kLeft = 110, kWidth = 862, kPhaseY = 8, kComputeY = 44, kTrack = 30, kLane = 40;
  // One comm lane per set of mesh axes: collectives over different groups
  // may run at once, each on its own stream.
  std::vector<std::string> lanes;
  for (const Instruction& i : p.instructions) {
    if (i.timed && i.comm && std::find(lanes.begin(), lanes.end(), i.axes) == lanes.end()) {
      lanes.push_back(i.axes);
    }
  }
  if (lanes.empty()) lanes.push_back("");
  std::sort(lanes.begin(), lanes.end());
  auto laneY = [&](const std::string& axes) {
    const size_t k = std::find(lanes.begin(), lanes.end(), axes) - lanes.begin();
    return kComputeY + kLane * (1 + static_cast<double>(k));
  };
  const double kAxisY = kComputeY + kLane * (1 + static_cast<double>(lanes.size()));
  double end = p.step_time_s;
  int64_t timed = 0;
  for (const Instruction& i : p.instructions) {
    if (!i.timed) continue;
    ++timed;
    end = std::max(end, i.start_s + i.duration_s);
  }
  if (timed == 0) {
    return "<section>\n<h2>Predicted timeline</h2>\n<p>The plan has no timed instructions "
           "(no start_s/duration_s).</p>\n</section>\n";
  }
  if (!(end > 0)) end = 1e-9;
  auto xOf = [&](double t) { return kLeft + kWidth * t / end; };

  std::string svg = svgOpen(kLeft + kWidth + 30, kAxisY + 34, "predicted timeline");
  // Phase bands.
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    double first = -1, last = 0;
    for (const Instruction& i : p.instructions) {
      if (!i.timed || i.phase != phase) continue;
      if (first < 0 || i.start_s < first) first = i.start_s;
      last = std::max(last, i.start_s + i.duration_s);
    }
    if (first < 0) continue;
    const double x0 = xOf(first), w = std::max(1.0, xOf(last) - x0);
    svg += rect(x0, kPhaseY, w, kAxisY - kPhaseY,
                absl::StrCat("fill=\"", phaseColor(phase), "\" fill-opacity=\"0.08\""),
                absl::StrCat(phase, ": ", formatSeconds(first), " to ", formatSeconds(last)));
    svg += rect(x0, kPhaseY, w, 20,
                absl::StrCat("fill=\"", phaseColor(phase), "\" fill-opacity=\"0.25\""));
    if (w > 8.0 * std::string(phase).size()) {
      svg += text(x0 + 6, kPhaseY + 14, phase, "font-size=\"12\" font-weight=\"600\"");
    }
  }
  svg += text(kLeft - 10, kComputeY + 20, "compute", "text-anchor=\"end\" font-size=\"13\"");
  svg += rect(kLeft, kComputeY, kWidth, kTrack, "fill=\"none\" stroke=\"#d9dde2\"");
  for (const std::string& axes : lanes) {
    svg += text(kLeft - 10, laneY(axes) + 20,
                axes.empty()            ? "comm"
                : axes == kHostCopyLane ? "host copies"
                                        : absl::StrCat("comm ", axes),
                "text-anchor=\"end\" font-size=\"13\"");
    svg += rect(kLeft, laneY(axes), kWidth, kTrack, "fill=\"none\" stroke=\"#d9dde2\"");
  }

  std::set<std::string> kinds;
  bool any_wait = false;
  std::set<std::string> phases_present;
  for (const Instruction& i : p.instructions) {
    if (!i.timed) continue;
    const bool wait = !i.comm && i.op == "dist.wait";
    std::string color;
    if (i.comm) {
      color = commColor(i.kind);
      kinds.insert(i.kind);
    } else if (wait) {
      if (!(i.duration_s > 0)) continue;  // no stall: nothing to draw
      color = kWaitColor;
      any_wait = true;
    } else {
      color = phaseColor(i.phase);
      phases_present.insert(i.phase);
    }
    std::string tip = absl::StrCat(i.op, " (", i.phase, ") start ", formatSeconds(i.start_s), ", ",
                                   formatSeconds(i.duration_s));
    if (i.comm) {
      absl::StrAppend(&tip, ", ", formatBytes(static_cast<double>(i.bytes)), "/rank",
                      i.axes.empty() ? "" : absl::StrCat(" over ", i.axes));
    }
    if (wait) absl::StrAppend(&tip, " (compute stalled on communication)");
    const double x = xOf(i.start_s);
    const double w = std::max(0.6, kWidth * i.duration_s / end);
    svg += rect(x, (i.comm ? laneY(i.axes) : kComputeY) + 2, w, kTrack - 4,
                absl::StrCat("class=\"event\" fill=\"", color, "\""), tip);
  }
  // Time axis.
  const double step = niceStep(end, 8);
  svg += line(kLeft, kAxisY, kLeft + kWidth, kAxisY, "stroke=\"#888\"");
  for (int t = 0; t * step <= end * 1.0001 && t < 100; ++t) {
    const double x = xOf(t * step);
    svg += line(x, kAxisY, x, kAxisY + 5, "stroke=\"#888\"");
    svg += line(x, kPhaseY + 20, x, kAxisY, "stroke=\"#000\" stroke-opacity=\"0.06\"");
    svg += text(x, kAxisY + 18, formatSeconds(t * step),
                "text-anchor=\"middle\" font-size=\"11\" fill=\"#555\"");
  }
  svg += "</svg>\n";

  std::string legend;
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    if (!phases_present.count(phase)) continue;
    absl::StrAppend(&legend, "<span class=\"item\">", swatch(phaseColor(phase)), "compute: ", phase,
                    "</span>\n");
  }
  if (any_wait) {
    absl::StrAppend(&legend, "<span class=\"item\">", swatch(kWaitColor),
                    "wait: compute stalled on communication</span>\n");
  }
  for (const std::string& kind : kinds) {
    absl::StrAppend(&legend, "<span class=\"item\">", swatch(commColor(kind)), esc(kind),
                    "</span>\n");
  }
  return absl::StrCat(
      "<section>\n<h2>Predicted timeline of one step (rank 0)</h2>\n", svg,
      "<div class=\"legend\">\n", legend, "</div>\n<p class=\"note\">", timed,
      " timed instructions from phases.*[].start_s and duration_s. Step ",
      esc(formatSeconds(p.step_time_s)), ": compute ", esc(formatSeconds(p.compute_s)),
      ", communication ", esc(formatSeconds(p.comm_s)), " of which ",
      esc(formatSeconds(p.exposed_comm_s)), " exposed, optimizer ",
      esc(formatSeconds(p.optimizer_s)), ". Hover a bar for the instruction.</p>\n</section>\n");
}

// ---------------------------------------------------------------------------
// Search.

std::string searchChart(const std::vector<SearchPoint>& points) {
  constexpr double kLeft = 86, kTop = 24, kWidth = 820, kHeight = 360;
  std::vector<const SearchPoint*> drawn;
  double max_t = 0, max_b = 0;
  std::set<int64_t> limits;
  for (const SearchPoint& p : points) {
    if (p.memory_limit_bytes > 0) limits.insert(p.memory_limit_bytes);
    if (!(p.step_time_s > 0) || !std::isfinite(p.step_time_s) || p.peak_bytes < 0) continue;
    drawn.push_back(&p);
    max_t = std::max(max_t, p.step_time_s);
    max_b = std::max(max_b, static_cast<double>(p.peak_bytes));
  }
  if (drawn.empty()) return "<p>No candidate has a positive step time to draw.</p>\n";
  const double limit = limits.empty() ? 0 : static_cast<double>(*limits.rbegin());
  const double gib = 1024.0 * 1024 * 1024;
  const double y_max_b = std::max(max_b, limit) * 1.12;
  const bool in_gib = y_max_b >= gib;
  const double unit = in_gib ? gib : 1024.0 * 1024;
  const double x_end = max_t * 1.1;
  const double y_end = std::max(y_max_b / unit, 1e-9);
  auto xOf = [&](double t) { return kLeft + kWidth * t / x_end; };
  auto yOf = [&](double b) { return kTop + kHeight - kHeight * (b / unit) / y_end; };

  std::string svg = svgOpen(kLeft + kWidth + 40, kTop + kHeight + 56,
                            "step time against peak memory per candidate");
  svg += rect(kLeft, kTop, kWidth, kHeight, "fill=\"#fbfcfd\" stroke=\"#d9dde2\"");
  const double xs = niceStep(x_end, 8), ys = niceStep(y_end, 6);
  for (int i = 0; i * xs <= x_end && i < 100; ++i) {
    const double x = xOf(i * xs);
    svg += line(x, kTop, x, kTop + kHeight, "stroke=\"#000\" stroke-opacity=\"0.06\"");
    svg += text(x, kTop + kHeight + 18, formatSeconds(i * xs),
                "text-anchor=\"middle\" font-size=\"11\" fill=\"#555\"");
  }
  for (int i = 0; i * ys <= y_end && i < 100; ++i) {
    const double y = kTop + kHeight - kHeight * (i * ys) / y_end;
    svg += line(kLeft, y, kLeft + kWidth, y, "stroke=\"#000\" stroke-opacity=\"0.06\"");
    svg += text(kLeft - 8, y + 4, absl::StrFormat("%g %s", i * ys, in_gib ? "GiB" : "MiB"),
                "text-anchor=\"end\" font-size=\"11\" fill=\"#555\"");
  }
  svg += text(kLeft + kWidth / 2, kTop + kHeight + 42, "predicted step time (lower is better)",
              "text-anchor=\"middle\" font-size=\"13\"");
  svg += text(18, kTop + kHeight / 2, "peak memory per device",
              absl::StrCat("text-anchor=\"middle\" font-size=\"13\" transform=\"rotate(-90 18 ",
                           px(kTop + kHeight / 2), ")\""));
  if (limit > 0) {
    const double y = yOf(limit);
    svg += line(kLeft, y, kLeft + kWidth, y,
                "class=\"limit\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"6 4\"");
    svg += text(kLeft + kWidth - 6, y - 6,
                absl::StrCat("memory limit ", formatBytes(limit),
                             limits.size() > 1 ? " (the largest of the candidates' limits)" : ""),
                "text-anchor=\"end\" font-size=\"12\" fill=\"#d62728\"");
  }
  const bool label_all = drawn.size() <= 16;
  const SearchPoint* winner = nullptr;
  for (const SearchPoint* p : drawn) {
    if (p->winner) winner = p;
  }
  // The winner's label, [x0, y0, x1, y1]; other labels that would cross it
  // are left to the tooltip and the table.
  double box[4] = {0, 0, -1, -1};
  if (winner != nullptr) {
    const double x = xOf(winner->step_time_s), y = yOf(static_cast<double>(winner->peak_bytes));
    box[0] = x + 12;
    box[1] = y - 22;
    box[2] = x + 16 + 8.0 * (winner->label.size() + 2);
    box[3] = y - 2;
  }
  for (const SearchPoint* p : drawn) {
    if (p == winner) continue;  // drawn last, on top
    const double x = xOf(p->step_time_s), y = yOf(static_cast<double>(p->peak_bytes));
    const std::string tip = absl::StrCat(p->label, ": step ", formatSeconds(p->step_time_s),
                                         ", peak ", formatBytes(static_cast<double>(p->peak_bytes)),
                                         p->fits ? "" : " (does not fit)");
    if (p->fits) {
      svg += absl::StrCat("<circle class=\"point\" cx=\"", px(x), "\" cy=\"", px(y),
                          "\" r=\"6\" fill=\"#4e79a7\" fill-opacity=\"0.85\"><title>", esc(tip),
                          "</title></circle>\n");
    } else {
      svg += absl::StrCat("<g class=\"point nofit\"><title>", esc(tip), "</title>",
                          line(x - 5, y - 5, x + 5, y + 5, "stroke=\"#d62728\" stroke-width=\"2\""),
                          line(x - 5, y + 5, x + 5, y - 5, "stroke=\"#d62728\" stroke-width=\"2\""),
                          "</g>\n");
    }
    const double lx0 = x + 9, ly0 = y - 7, lx1 = x + 9 + 6.5 * p->label.size(), ly1 = y + 6;
    const bool crosses_winner = lx0 < box[2] && box[0] < lx1 && ly0 < box[3] && box[1] < ly1;
    if (label_all && !crosses_winner) {
      svg += text(x + 9, y + 4, p->label, "font-size=\"11\" fill=\"#444\"");
    }
  }
  if (winner != nullptr) {
    const double x = xOf(winner->step_time_s), y = yOf(static_cast<double>(winner->peak_bytes));
    svg += absl::StrCat(
        "<circle class=\"point winner\" cx=\"", px(x), "\" cy=\"", px(y),
        "\" r=\"10\" fill=\"#f1c232\" stroke=\"#7f6000\" stroke-width=\"2.5\"><title>",
        esc(absl::StrCat("winner ", winner->label, ": step ", formatSeconds(winner->step_time_s),
                         ", peak ", formatBytes(static_cast<double>(winner->peak_bytes)))),
        "</title></circle>\n");
    svg += text(x + 14, y - 8, absl::StrCat("\u2605 ", winner->label),
                "font-size=\"13\" font-weight=\"700\" fill=\"#7f6000\"");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace

absl::StatusOr<std::string> renderPlanPage(const plan::Plan& plan) {
  absl::StatusOr<PageModel> read = modelOf(plan);
  if (!read.ok()) return read.status();
  const PageModel& p = *read;
  const std::string title = absl::StrCat("Plan: ", p.model);
  const std::string mesh_text = meshName(p);
  std::string out = pageOpen(title);
  absl::StrAppend(
      &out, "<h1>", esc(title), "</h1>\n<p class=\"sub\">",
      p.function.empty() ? "" : absl::StrCat("function ", esc(p.function), " \u00b7 "), "mesh ",
      esc(mesh_text),
      p.strategies.empty() ? "" : absl::StrCat(" (", esc(absl::StrJoin(p.strategies, ", ")), ")"),
      " \u00b7 ", p.hosts, " host", p.hosts == 1 ? "" : "s", " \u00d7 ", p.devices_per_host, " ",
      esc(p.device_name), "</p>\n");
  absl::StrAppend(
      &out, "<div class=\"cards\">\n", card(formatSeconds(p.step_time_s), "predicted step"),
      card(formatSeconds(p.compute_s), "compute"), card(formatSeconds(p.comm_s), "communication"),
      card(formatSeconds(p.exposed_comm_s), "exposed communication"),
      card(formatSeconds(p.optimizer_s), "optimizer"),
      card(formatBytes(static_cast<double>(p.peak_bytes)), "peak memory per rank"),
      card(formatBytes(static_cast<double>(p.comm_bytes_per_rank)),
           "communicated per rank per step"),
      "</div>\n");
  absl::StrAppend(&out, meshSection(p), memorySection(p), timelineSection(p), kPageClose);
  return out;
}

std::string renderSearchPage(const std::vector<SearchPoint>& points, std::string_view title) {
  std::string out = pageOpen(title);
  absl::StrAppend(&out, "<h1>", esc(title), "</h1>\n");
  if (points.empty()) {
    absl::StrAppend(&out, "<section>\n<p>No candidates.</p>\n</section>\n", kPageClose);
    return out;
  }
  int64_t fitting = 0;
  for (const SearchPoint& p : points) fitting += p.fits ? 1 : 0;
  absl::StrAppend(&out, "<p class=\"sub\">", points.size(), " candidate",
                  points.size() == 1 ? "" : "s", ", ", fitting, " fit in memory</p>\n");
  absl::StrAppend(
      &out, "<section>\n<h2>Step time against peak memory</h2>\n", searchChart(points),
      "<div class=\"legend\">\n<span class=\"item\">", swatch("#f1c232", "border-color:#7f6000"),
      "winner</span>\n<span class=\"item\">", swatch("#4e79a7"),
      "fits</span>\n<span class=\"item\"><span class=\"swatch\" style=\"background:#fff;"
      "border:2px solid #d62728\"></span>does not fit (\u00d7)</span>\n<span class=\"item\">"
      "<span class=\"swatch\" style=\"height:0;border:0;border-top:2px dashed #d62728;"
      "border-radius:0\"></span>memory limit</span>\n</div>\n</section>\n");

  std::vector<const SearchPoint*> order;
  for (const SearchPoint& p : points) order.push_back(&p);
  std::stable_sort(order.begin(), order.end(), [](const SearchPoint* a, const SearchPoint* b) {
    if (a->winner != b->winner) return a->winner;
    if (a->fits != b->fits) return a->fits;
    return a->step_time_s < b->step_time_s;
  });
  absl::StrAppend(&out,
                  "<section>\n<h2>Candidates</h2>\n<table>\n<tr><th class=\"n\">#</th>"
                  "<th>candidate</th><th class=\"n\">step time</th><th class=\"n\">tokens/s/device"
                  "</th><th class=\"n\">MFU</th><th class=\"n\">peak memory</th><th class=\"n\">"
                  "limit</th><th class=\"n\">exposed comm</th><th>fits</th></tr>\n");
  for (size_t i = 0; i < order.size(); ++i) {
    const SearchPoint& p = *order[i];
    absl::StrAppend(
        &out, "<tr", p.winner ? " class=\"winner\"" : (p.fits ? "" : " class=\"nofit\""),
        "><td class=\"n\">", i + 1, "</td><td>", p.winner ? "\u2605 " : "", esc(p.label),
        "</td><td class=\"n\">", esc(formatSeconds(p.step_time_s)), "</td><td class=\"n\">",
        absl::StrFormat("%.0f", p.tokens_per_s_per_device), "</td><td class=\"n\">",
        absl::StrFormat("%.1f%%", 100 * p.mfu), "</td><td class=\"n\">",
        esc(formatBytes(static_cast<double>(p.peak_bytes))), "</td><td class=\"n\">",
        p.memory_limit_bytes > 0 ? esc(formatBytes(static_cast<double>(p.memory_limit_bytes)))
                                 : "-",
        "</td><td class=\"n\">", esc(formatSeconds(p.exposed_comm_s)), "</td><td>",
        p.fits ? "yes" : "no", "</td></tr>\n");
  }
  absl::StrAppend(&out, "</table>\n</section>\n", kPageClose);
  return out;
}

}  // namespace loom::planner::visual
