// Repeated blocks in scopes (scope.h).
#include "plan/scope.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace loom::plan {

std::optional<RepeatedBlock> repeatedBlockOf(std::string_view scope) {
  size_t begin = 0;
  while (begin < scope.size()) {
    size_t end = scope.find('.', begin);
    if (end == std::string_view::npos) end = scope.size();
    const std::string_view part = scope.substr(begin, end - begin);
    int64_t index = 0;
    bool digits = !part.empty();
    for (char c : part) digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
    if (digits && begin > 0 && absl::SimpleAtoi(std::string(part), &index)) {
      return RepeatedBlock{.stack = std::string(scope.substr(0, begin - 1)), .index = index};
    }
    begin = end + 1;
  }
  return std::nullopt;
}

}  // namespace loom::plan
