#include "tools/train/train_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/executor/trace_recorder.h"
#include "tools/html/svg_page.h"

namespace loom::train {
namespace {

using html::esc;
using html::px;

// One curve of a chart: (step, value) points in one colour.
struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;
  bool dots = false;  // sparse points (evaluations) drawn as dots too
};

// A line chart over steps with a y axis from the series' range; `format`
// writes a tick value.
std::string lineChart(const std::string& label, const std::vector<Series>& series,
                      std::string (*format)(double)) {
  constexpr double kW = 1000, kH = 220, kLeft = 78, kRight = 16, kTop = 12, kBottom = 30;
  double x0 = std::numeric_limits<double>::max(), x1 = std::numeric_limits<double>::lowest();
  double y0 = x0, y1 = x1;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::string svg = html::svgOpen(kW, kH, label);
  if (x0 > x1) return absl::StrCat(svg, html::text(kLeft, kH / 2, "no data"), "</svg>\n");
  if (x1 == x0) x1 = x0 + 1;
  // A little room above and below, and a flat curve still gets an axis.
  const double pad = y1 > y0 ? 0.08 * (y1 - y0) : std::max(std::abs(y0) * 0.05, 1e-9);
  y0 -= pad, y1 += pad;
  const double plotW = kW - kLeft - kRight, plotH = kH - kTop - kBottom;
  auto sx = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * plotW; };
  auto sy = [&](double y) { return kTop + (y1 - y) / (y1 - y0) * plotH; };
  const double yStep = html::niceStep(y1 - y0, 5);
  for (double t = std::ceil(y0 / yStep) * yStep; t <= y1; t += yStep) {
    svg += html::line(kLeft, sy(t), kW - kRight, sy(t), "stroke=\"#eceff2\"");
    svg += html::text(kLeft - 6, sy(t) + 4, format(t), "text-anchor=\"end\" font-size=\"11\"");
  }
  const double xStep = std::max(1.0, html::niceStep(x1 - x0, 10));
  for (double t = std::ceil(x0 / xStep) * xStep; t <= x1; t += xStep) {
    svg += html::line(sx(t), kTop + plotH, sx(t), kTop + plotH + 4, "stroke=\"#888\"");
    svg += html::text(sx(t), kH - 10, absl::StrFormat("%.0f", t),
                      "text-anchor=\"middle\" font-size=\"11\"");
  }
  svg += html::line(kLeft, kTop + plotH, kW - kRight, kTop + plotH, "stroke=\"#888\"");
  for (const Series& s : series) {
    std::string points;
    for (const auto& [x, y] : s.points) absl::StrAppend(&points, px(sx(x)), ",", px(sy(y)), " ");
    svg += absl::StrCat("<polyline fill=\"none\" stroke=\"", s.color,
                        "\" stroke-width=\"1.8\" points=\"", points, "\"/>\n");
    if (!s.dots) continue;
    for (const auto& [x, y] : s.points) {
      svg += absl::StrCat("<circle cx=\"", px(sx(x)), "\" cy=\"", px(sy(y)), "\" r=\"3.5\" fill=\"",
                          s.color, "\"><title>", esc(absl::StrFormat("step %.0f: %s", x, format(y))),
                          "</title></circle>\n");
    }
  }
  svg += "</svg>\n<div class=\"legend\">";
  for (const Series& s : series) {
    absl::StrAppend(&svg, "<span class=\"item\">", html::swatch(s.color), esc(s.name), "</span>");
  }
  return svg + "</div>\n";
}

// Ticks land on multiples of a step; a sum that misses zero by rounding
// prints as 0, not -0 or 1e-19.
std::string plain(double v) { return absl::StrFormat("%.4g", std::abs(v) < 1e-12 ? 0.0 : v); }
std::string seconds(double v) { return html::formatSeconds(v); }

// A pipeline stage waiting for another, in the timeline and its own chart.
constexpr char kBubbleColor[] = "#b07aa1";

// A bar of a timeline row.
struct Span {
  double start = 0, duration = 0;  // seconds from the step's start
  std::string name, color;
};

// "dist.all_gather_start" -> "all_gather".
std::string collectiveKind(std::string_view op) {
  if (op.substr(0, 5) == "dist.") op.remove_prefix(5);
  constexpr std::string_view kStart = "_start";
  if (op.size() > kStart.size() && op.substr(op.size() - kStart.size()) == kStart) {
    op.remove_suffix(kStart.size());
  }
  return std::string(op);
}

// The plan's predicted step on this rank's program: compute and comm rows.
std::map<std::string, std::vector<Span>> predictedRows(const plan::Plan& plan) {
  std::map<std::string, std::vector<Span>> rows;
  if (plan.programs.empty()) return rows;
  for (const plan::Instruction* in : plan.programs[0].instructions()) {
    if (!in->start_s || !in->duration_s || *in->duration_s <= 0) continue;
    const bool comm = in->commStream();
    rows[comm ? "2 communication" : "1 compute"].push_back(
        {*in->start_s, *in->duration_s, in->op,
         comm ? html::commColor(collectiveKind(in->op))
              : html::phaseColor(plan::phaseName(in->phase))});
  }
  return rows;
}

// Rank 0's events of the last traced step, by track, from the step's first
// event on.
std::map<std::string, std::vector<Span>> measuredRows(const nlohmann::json& trace) {
  std::map<std::string, std::vector<Span>> rows;
  std::map<int, std::string> tracks;
  int64_t last = -1;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("pid", -1) != 0) continue;
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      tracks[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
    }
    if (e["ph"] == "X") last = std::max(last, e["args"].value("step", int64_t{-1}));
  }
  double t0 = std::numeric_limits<double>::max();
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("pid", -1) == 0 && e["ph"] == "X" && e["args"].value("step", -2) == last)
      t0 = std::min(t0, e["ts"].get<double>());
  }
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("pid", -1) != 0 || e["ph"] != "X" || e["args"].value("step", -2) != last) continue;
    const int tid = e["tid"].get<int>();
    const std::string track = tracks.count(tid) ? tracks[tid] : absl::StrCat("track ", tid);
    const std::string name = e["name"].get<std::string>();
    const bool bubble = track == runtime::kBubbleTrack;
    const bool comm = tid != 1 && !bubble;
    const bool wait = name.rfind("wait ", 0) == 0;
    // Compute first, its bubbles under it, then the communication groups.
    const int order = comm ? 3 : bubble ? 2 : 1;
    rows[absl::StrCat(order, " ", track)].push_back(
        {(e["ts"].get<double>() - t0) / 1e6, e["dur"].get<double>() / 1e6, name,
         comm     ? html::commColor(name)
         : bubble ? kBubbleColor
         : wait   ? "#ff6b6b"
                  : html::phaseColor(e.value("cat", ""))});
  }
  return rows;
}

// Rows of bars on a shared time axis [0, span].
std::string timeline(const std::string& label, const std::map<std::string, std::vector<Span>>& rows,
                     double span) {
  constexpr double kW = 1000, kLeft = 150, kRight = 16, kRowH = 22, kTop = 6;
  const double h = kTop + rows.size() * (kRowH + 6) + 30;
  std::string svg = html::svgOpen(kW, h, label);
  const double plotW = kW - kLeft - kRight;
  auto sx = [&](double t) { return kLeft + t / span * plotW; };
  double y = kTop;
  for (const auto& [row, spans] : rows) {
    svg += html::text(kLeft - 8, y + 15, row.substr(2), "text-anchor=\"end\" font-size=\"12\"");
    svg += html::rect(kLeft, y, plotW, kRowH, "fill=\"#f6f7f9\"");
    for (const Span& s : spans) {
      svg += html::rect(sx(s.start), y + 2, std::max(0.6, s.duration / span * plotW), kRowH - 4,
                        absl::StrCat("fill=\"", s.color, "\""),
                        absl::StrCat(s.name, " at ", html::formatSeconds(s.start), ", ",
                                     html::formatSeconds(s.duration)));
    }
    y += kRowH + 6;
  }
  const double step = html::niceStep(span, 8);
  for (double t = 0; t <= span * 1.0001; t += step) {
    svg += html::line(sx(t), y, sx(t), y + 4, "stroke=\"#888\"");
    svg += html::text(sx(t), y + 18, html::formatSeconds(t),
                      "text-anchor=\"middle\" font-size=\"11\"");
  }
  return svg + "</svg>\n";
}

double spanOf(const std::map<std::string, std::vector<Span>>& rows) {
  double end = 0;
  for (const auto& [row, spans] : rows) {
    for (const Span& s : spans) end = std::max(end, s.start + s.duration);
  }
  return end;
}

std::string curvesSection(const std::vector<StepMetrics>& steps) {
  Series loss{"training loss", "#4e79a7", {}}, eval{"held-out loss", "#e15759", {}, true};
  Series lr{"learning rate", "#59a14f", {}}, tps{"tokens/s", "#f28e2b", {}};
  Series exposed{"exposed communication (host blocked)", "#ff6b6b", {}};
  Series stepTime{"step time", "#4e79a7", {}};
  Series bubble{"pipeline bubble (waiting for other stages)", kBubbleColor, {}};
  for (const StepMetrics& m : steps) {
    const double x = static_cast<double>(m.step);
    loss.points.emplace_back(x, m.loss);
    if (m.eval_loss) eval.points.emplace_back(x, *m.eval_loss);
    lr.points.emplace_back(x, m.lr);
    tps.points.emplace_back(x, m.tokens_per_s);
    stepTime.points.emplace_back(x, m.step_s);
    if (m.exposed_comm_s) exposed.points.emplace_back(x, *m.exposed_comm_s);
    if (m.bubble_s) bubble.points.emplace_back(x, *m.bubble_s);
  }
  std::vector<Series> losses = {loss};
  if (!eval.points.empty()) losses.push_back(eval);
  std::vector<Series> times = {stepTime};
  if (!exposed.points.empty()) times.push_back(exposed);
  if (!bubble.points.empty()) times.push_back(bubble);
  return absl::StrCat(
      "<section><h2>Loss</h2>\n", lineChart("loss per step", losses, plain),
      eval.points.empty() ? "<p class=\"note\">No evaluation: run with --eval_every and "
                            "--eval_data for the held-out curve.</p>\n"
                          : "",
      "</section>\n<section><h2>Learning rate</h2>\n", lineChart("learning rate", {lr}, plain),
      "</section>\n<section><h2>Throughput</h2>\n", lineChart("tokens per second", {tps}, plain),
      lineChart("step time", times, seconds), "</section>\n");
}

std::string timelineSection(const ReportInput& in) {
  const auto predicted = predictedRows(*in.plan);
  std::string out = "<section><h2>A step: predicted and measured (rank 0)</h2>\n";
  if (!in.trace) {
    const double span = spanOf(predicted);
    return absl::StrCat(out, "<p class=\"sub\">predicted by the plan: ", html::formatSeconds(span),
                        "</p>\n", span > 0 ? timeline("predicted step", predicted, span) : "",
                        "<p class=\"note\">Run with --trace=FILE for the measured timeline "
                        "beside it.</p>\n</section>\n");
  }
  const auto measured = measuredRows(*in.trace);
  // One time axis for both, so that the bars compare.
  const double span = std::max(spanOf(predicted), spanOf(measured));
  if (span <= 0) return absl::StrCat(out, "<p class=\"note\">nothing to draw</p></section>\n");
  return absl::StrCat(
      out, "<p class=\"sub\">predicted by the plan (", html::formatSeconds(spanOf(predicted)),
      ", on the plan's device model)</p>\n", timeline("predicted step", predicted, span),
      "<p class=\"sub\">measured, the last traced step (", html::formatSeconds(spanOf(measured)),
      "; red: compute waiting for a collective; purple: a pipeline stage waiting for another)"
      "</p>\n",
      timeline("measured step", measured, span), "<div class=\"legend\">",
      absl::StrCat("<span class=\"item\">", html::swatch(html::phaseColor("forward")),
                   "forward</span><span class=\"item\">",
                   html::swatch(html::phaseColor("backward")),
                   "backward</span><span class=\"item\">",
                   html::swatch(html::phaseColor("optimizer")), "optimizer</span>"),
      absl::StrCat("<span class=\"item\">", html::swatch(html::commColor("all_gather")),
                   "all-gather</span><span class=\"item\">",
                   html::swatch(html::commColor("reduce_scatter")),
                   "reduce-scatter</span><span class=\"item\">",
                   html::swatch(html::commColor("all_reduce")), "all-reduce</span>"),
      "</div>\n</section>\n");
}

// One bar of a horizontal bar chart.
struct Bar {
  std::string label;
  double value = 0;
  std::string color, text;
};

// Bars scaled so that `top` spans the plot, and a dashed line at `mark`
// (when positive) captioned `mark_text`.
std::string barChart(const std::string& label, const std::vector<Bar>& bars, double top,
                     double mark, const std::string& mark_text) {
  constexpr double kW = 1000, kLeft = 110, kRowH = 24, kRight = 130;
  const double h = bars.size() * (kRowH + 8) + 30;
  const double plotW = kW - kLeft - kRight;
  std::string svg = html::svgOpen(kW, h, label);
  double y = 6;
  for (const Bar& bar : bars) {
    svg += html::text(kLeft - 8, y + 16, bar.label, "text-anchor=\"end\" font-size=\"12\"");
    svg += html::rect(kLeft, y, bar.value / top * plotW, kRowH,
                      absl::StrCat("fill=\"", bar.color, "\""),
                      absl::StrCat(bar.label, ": ", bar.text));
    svg += html::text(kLeft + bar.value / top * plotW + 6, y + 16, bar.text, "font-size=\"12\"");
    y += kRowH + 8;
  }
  if (mark > 0) {
    const double x = kLeft + mark / top * plotW;
    svg += html::line(x, 0, x, y, "stroke=\"#222\" stroke-dasharray=\"4 3\"");
    svg += html::text(x, y + 16, mark_text, "text-anchor=\"middle\" font-size=\"12\"");
  }
  return svg + "</svg>\n";
}

// Measured peak per phase (the largest over ranks) as bars, the plan's
// predicted peak as a line.
std::string memorySection(const ReportInput& in) {
  const std::vector<std::string> phases = {"forward", "backward", "optimizer", "checkpoint",
                                           "eval"};
  const double predicted = in.memory.value("predicted_peak_bytes", 0.0);
  std::vector<Bar> bars;
  double top = predicted;
  for (const std::string& phase : phases) {
    double peak = 0;
    for (const nlohmann::json& r : in.memory.value("ranks", nlohmann::json::array())) {
      peak = std::max(peak, r.value(phase, 0.0));
    }
    if (peak <= 0) continue;
    bars.push_back({phase, peak, phase == "eval" ? "#e15759" : html::phaseColor(phase),
                    html::formatBytes(peak)});
    top = std::max(top, peak);
  }
  std::string out = "<section><h2>Memory per phase against the plan</h2>\n";
  if (bars.empty() || top <= 0) return out + "<p class=\"note\">no memory measured</p></section>\n";
  out += barChart("memory per phase", bars, top, predicted,
                  absl::StrCat("plan: ", html::formatBytes(predicted)));
  out += "<table><tr><th>rank</th>";
  for (const Bar& bar : bars) absl::StrAppend(&out, "<th class=\"n\">", bar.label, "</th>");
  out += "<th class=\"n\">vs plan</th></tr>\n";
  for (const nlohmann::json& r : in.memory.value("ranks", nlohmann::json::array())) {
    absl::StrAppend(&out, "<tr><td>", r.value("rank", 0), "</td>");
    for (const Bar& bar : bars) {
      absl::StrAppend(&out, "<td class=\"n\">", html::formatBytes(r.value(bar.label, 0.0)),
                      "</td>");
    }
    const double diff =
        predicted > 0 ? 100.0 * (r.value("peak", 0.0) - predicted) / predicted : 0.0;
    absl::StrAppend(&out, "<td class=\"n\">", absl::StrFormat("%+.1f %%", diff), "</td></tr>\n");
  }
  return out + "</table>\n</section>\n";
}

// Each stage's measured bubble as a share of its step, beside the plan's
// share: shares compare across device models, where seconds on this CPU
// and the plan's device do not.
std::string bubbleSection(const ReportInput& in) {
  if (in.bubbles.is_null()) return "";
  const double predicted = in.bubbles["predicted_bubble_s"].get<double>();
  const double predictedStep = in.bubbles["predicted_step_s"].get<double>();
  const double planShare = predictedStep > 0 ? 100.0 * predicted / predictedStep : 0.0;
  std::vector<Bar> bars;
  double top = planShare;
  std::string rows;
  for (const nlohmann::json& s : in.bubbles["stages"]) {
    const double bubble = s["bubble_s"].get<double>(), step = s["step_s"].get<double>();
    const double share = step > 0 ? 100.0 * bubble / step : 0.0;
    const std::string stage = absl::StrCat("stage ", s["stage"].get<int>());
    bars.push_back({stage, share, kBubbleColor,
                    absl::StrFormat("%.1f %% (%s)", share, html::formatSeconds(bubble))});
    top = std::max(top, share);
    absl::StrAppend(&rows, "<tr><td>", stage, "</td><td>",
                    absl::StrJoin(s["ranks"].get<std::vector<int64_t>>(), ", "),
                    "</td><td class=\"n\">", html::formatSeconds(bubble), "</td><td class=\"n\">",
                    absl::StrFormat("%.1f %%", share), "</td><td class=\"n\">",
                    predicted > 0 ? absl::StrFormat("%.3gx", bubble / predicted) : "-",
                    "</td></tr>\n");
  }
  std::string out = absl::StrCat(
      "<section><h2>Pipeline bubble per stage against the plan</h2>\n<p class=\"sub\">the time "
      "each stage's ranks waited for other stages, median per step after the first, as a share "
      "of the step; the plan predicts ",
      html::formatSeconds(predicted), " of a ", html::formatSeconds(predictedStep),
      " step for the stage that sets the step</p>\n");
  if (top <= 0) return out + "<p class=\"note\">no bubble measured</p></section>\n";
  return absl::StrCat(out,
                      barChart("pipeline bubble per stage", bars, top, planShare,
                               absl::StrFormat("plan: %.1f %%", planShare)),
                      "<table><tr><th>stage</th><th>ranks</th><th class=\"n\">bubble per step"
                      "</th><th class=\"n\">share of step</th><th class=\"n\">vs plan</th>"
                      "</tr>\n",
                      rows, "</table>\n</section>\n");
}

std::string cardsOf(const ReportInput& in) {
  const std::vector<StepMetrics>& s = in.steps;
  std::vector<double> warm;
  for (size_t i = 1; i < s.size(); ++i) warm.push_back(s[i].step_s);
  std::sort(warm.begin(), warm.end());
  std::string out = "<div class=\"cards\">\n";
  out += html::card(absl::StrCat(s.size()), "steps");
  if (s.empty()) return out + "</div>\n";
  out += html::card(absl::StrFormat("%.4f", s.front().loss), "first loss");
  out += html::card(absl::StrFormat("%.4f", s.back().loss), "last loss");
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (!it->eval_loss) continue;
    out += html::card(absl::StrFormat("%.4f", *it->eval_loss),
                      absl::StrCat("held-out loss at step ", it->step));
    break;
  }
  if (!warm.empty()) {
    const double median = warm[warm.size() / 2];
    out += html::card(html::formatSeconds(median), "median step (after the first)");
    out += html::card(absl::StrFormat("%.0f", s.back().tokens_per_s * s.back().step_s / median),
                      "tokens/s at the median");
  }
  out += html::card(html::formatSeconds(in.plan->predicted.step_time_s), "predicted step");
  out += html::card(html::formatBytes(in.plan->predicted.peak_bytes), "predicted peak per rank");
  return out + "</div>\n";
}

}  // namespace

std::string renderTrainReport(const ReportInput& in) {
  return absl::StrCat(html::pageOpen(absl::StrCat("Training report: ", in.title)),
                      "<h1>Training report</h1>\n<p class=\"sub\">", esc(in.title), "</p>\n",
                      cardsOf(in), curvesSection(in.steps), timelineSection(in), memorySection(in),
                      bubbleSection(in), html::kPageClose);
}

}  // namespace loom::train
