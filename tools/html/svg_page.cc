// The pieces every Loom HTML page is drawn with (see svg_page.h).
#include "tools/html/svg_page.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace loom::html {

// ---------------------------------------------------------------------------
// Text and numbers.

std::string esc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// An SVG coordinate: one decimal is finer than a pixel.
std::string px(double v) { return absl::StrFormat("%.1f", v); }

std::string formatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double v = bytes;
  while (std::abs(v) >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrFormat("%.0f B", v);
  return absl::StrFormat(v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, units[u]);
}

std::string formatSeconds(double s) {
  const double a = std::abs(s);
  if (a == 0) return "0 s";
  if (a >= 1) return absl::StrFormat("%.3g s", s);
  if (a >= 1e-3) return absl::StrFormat("%.3g ms", s * 1e3);
  if (a >= 1e-6) return absl::StrFormat("%.3g us", s * 1e6);
  return absl::StrFormat("%.3g ns", s * 1e9);
}

// A tick step of 1, 2 or 5 times a power of ten giving about `target`
// ticks over [0, range].
double niceStep(double range, int target) {
  if (!(range > 0)) return 1;
  const double raw = range / target;
  const double power = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * power) return m * power;
  }
  return 10 * power;
}

std::string rect(double x, double y, double w, double h, std::string_view attrs,
                 std::string_view title) {
  std::string out =
      absl::StrCat("<rect x=\"", px(x), "\" y=\"", px(y), "\" width=\"", px(std::max(0.0, w)),
                   "\" height=\"", px(std::max(0.0, h)), "\" ", std::string(attrs));
  if (title.empty()) return absl::StrCat(out, "/>\n");
  return absl::StrCat(out, "><title>", esc(title), "</title></rect>\n");
}

std::string text(double x, double y, std::string_view content, std::string_view attrs) {
  return absl::StrCat("<text x=\"", px(x), "\" y=\"", px(y), "\"", attrs.empty() ? "" : " ",
                      std::string(attrs), ">", esc(content), "</text>\n");
}

std::string line(double x1, double y1, double x2, double y2, std::string_view attrs) {
  return absl::StrCat("<line x1=\"", px(x1), "\" y1=\"", px(y1), "\" x2=\"", px(x2), "\" y2=\"",
                      px(y2), "\" ", std::string(attrs), "/>\n");
}

std::string svgOpen(double width, double height, std::string_view label) {
  return absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", px(width), " ",
                      px(height), "\" width=\"", px(width), "\" height=\"", px(height),
                      "\" role=\"img\" aria-label=\"", esc(label), "\">\n");
}

std::string swatch(std::string_view color, std::string_view extra_style) {
  return absl::StrCat("<span class=\"swatch\" style=\"background:", std::string(color), ";",
                      std::string(extra_style), "\"></span>");
}

constexpr char kCss[] = R"css(
body { font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #222; background: #f6f7f9; margin: 0; }
main { max-width: 1060px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 17px; margin: 0 0 8px; }
.sub { color: #555; margin: 0 0 16px; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 14px 16px;
          margin: 0 0 16px; }
.cards { display: flex; flex-wrap: wrap; margin: 0 0 6px; }
.card { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 8px 12px;
        min-width: 120px; margin: 0 10px 10px 0; }
.card .v { font-size: 18px; font-weight: 600; }
.card .k { color: #666; font-size: 12px; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font-family: inherit; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 8px 0 0; font-size: 13px; }
.legend span.item { white-space: nowrap; margin-right: 14px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
          vertical-align: -1px; margin-right: 5px; border: 1px solid rgba(0,0,0,.25); }
table { border-collapse: collapse; font-size: 13px; margin-top: 8px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eceff2; text-align: left; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.winner td { font-weight: 600; background: #fff6d5; }
tr.nofit td { color: #999; }
.note { color: #666; font-size: 12px; margin: 6px 0 0; }
)css";

std::string pageOpen(std::string_view title) {
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>",
      esc(title), "</title>\n<style>", kCss, "</style>\n</head>\n<body>\n<main>\n");
}

const char kPageClose[] = "</main>\n</body>\n</html>\n";

std::string card(std::string_view value, std::string_view key) {
  return absl::StrCat("<div class=\"card\"><div class=\"v\">", esc(value),
                      "</div><div class=\"k\">", esc(key), "</div></div>\n");
}

// ---------------------------------------------------------------------------
// Colours.

std::string commColor(std::string_view kind) {
  if (kind == "all_gather") return "#59a14f";
  if (kind == "reduce_scatter") return "#f28e2b";
  if (kind == "all_reduce") return "#b07aa1";
  if (kind == "all_to_all") return "#edc948";
  if (kind == "broadcast") return "#76b7b2";
  return "#9d9d9d";
}

std::string phaseColor(std::string_view phase) {
  if (phase == "forward") return "#4e79a7";
  if (phase == "backward") return "#8fb3d9";
  return "#9c755f";
}

}  // namespace loom::html
