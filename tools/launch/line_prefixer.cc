// Line splitting for LinePrefixer: complete lines pass through at once, the
// tail waits in a buffer capped at kMaxLineBytes.
#include "tools/launch/line_prefixer.h"

#include <algorithm>

namespace loom::launch {

std::string LinePrefixer::feed(absl::string_view bytes) {
  std::string out;
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline != absl::string_view::npos) {
      out.append(prefix_).append(partial_);
      out.append(bytes.data(), newline + 1);
      partial_.clear();
      bytes.remove_prefix(newline + 1);
      continue;
    }
    const size_t room = kMaxLineBytes - partial_.size();
    const size_t take = std::min(room, bytes.size());
    partial_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (partial_.size() == kMaxLineBytes) {
      out.append(prefix_).append(partial_).append("\n");
      partial_.clear();
    }
  }
  return out;
}

std::string LinePrefixer::finish() {
  if (partial_.empty()) return "";
  std::string out = prefix_ + partial_ + "\n";
  partial_.clear();
  return out;
}

}  // namespace loom::launch
