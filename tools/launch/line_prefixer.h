// Turns a rank's output stream into whole lines that each start with the
// rank's prefix, so that output of ranks running side by side never mixes
// within a line.
#ifndef LOOM_TOOLS_LAUNCH_LINE_PREFIXER_H_
#define LOOM_TOOLS_LAUNCH_LINE_PREFIXER_H_

#include <cstddef>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace loom::launch {

// A line longer than this is cut and written in pieces, each prefixed, so a
// rank that never writes a newline cannot make the launcher buffer without
// bound.
inline constexpr size_t kMaxLineBytes = 64 * 1024;

class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Takes the next bytes of the stream and returns every line they complete,
  // prefixed and newline-terminated, ready for one write; an unfinished last
  // line is kept for the next call.
  std::string feed(absl::string_view bytes);

  // The unfinished last line, prefixed and given a newline, or "" if the
  // stream ended on a line break. Call it when the stream ends.
  std::string finish();

 private:
  std::string prefix_;
  std::string partial_;
};

}  // namespace loom::launch

#endif  // LOOM_TOOLS_LAUNCH_LINE_PREFIXER_H_
