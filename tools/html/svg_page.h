// The pieces Loom's self-contained HTML pages are drawn with: one style
// sheet, page open and close, cards, escaped text, SVG shapes and the
// colours of phases and collectives, so that the plan page
// (planner/export/visual_report) and the training report
// (tools/train/train_report) look alike. Inline SVG and CSS only.
#ifndef LOOM_TOOLS_HTML_SVG_PAGE_H_
#define LOOM_TOOLS_HTML_SVG_PAGE_H_

#include <string>
#include <string_view>

namespace loom::html {

// Text escaped for HTML content and attribute values.
std::string esc(std::string_view text);
// An SVG coordinate: one decimal is finer than a pixel.
std::string px(double v);
std::string formatBytes(double bytes);      // "1.50 MiB"
std::string formatSeconds(double seconds);  // "12.3 ms"
// A tick step of 1, 2 or 5 times a power of ten giving about `target`
// ticks over [0, range].
double niceStep(double range, int target);

std::string rect(double x, double y, double w, double h, std::string_view attrs,
                 std::string_view title = {});
std::string text(double x, double y, std::string_view content, std::string_view attrs = {});
std::string line(double x1, double y1, double x2, double y2, std::string_view attrs);
std::string svgOpen(double width, double height, std::string_view label);
// A legend's colour square.
std::string swatch(std::string_view color, std::string_view extra_style = {});

// <!DOCTYPE html> ... <main>, with the shared style sheet; kPageClose ends it.
std::string pageOpen(std::string_view title);
extern const char kPageClose[];
// A figure card: a large value over its key.
std::string card(std::string_view value, std::string_view key);

// Colours: a collective kind ("all_gather", ...) and a phase ("forward",
// "backward", anything else as the optimizer's).
std::string commColor(std::string_view kind);
std::string phaseColor(std::string_view phase);

}  // namespace loom::html

#endif  // LOOM_TOOLS_HTML_SVG_PAGE_H_
