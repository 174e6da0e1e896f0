// Reading and writing one typed attribute (plan.h's Attrs) as JSON, by its
// AttrId: the one place that knows each attribute's JSON key, type and
// field. The reader and the writer use it, and the exporter sets
// attributes through setAttrFromJson.
#ifndef LOOM_PLAN_ATTRS_CODEC_H_
#define LOOM_PLAN_ATTRS_CODEC_H_

#include <optional>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "plan/op_table.h"
#include "plan/plan.h"

namespace loom::plan {

// Sets attribute `key` of `in` (whose `info` is set) from `value`, as the
// reader does. Fails when the op's table row has no such attribute or the
// value has the wrong type, naming the op, the key and the value.
absl::Status setAttrFromJson(Instruction& in, std::string_view key, const nlohmann::json& value);

namespace internal {

// The attribute whose JSON key is `key`, if any.
std::optional<AttrId> attrFromName(std::string_view key);

// Sets the field of `id` from `value`; the error says what type it needs
// ("must be an integer, got \"x\"") without a path.
absl::Status readAttr(AttrId id, const nlohmann::json& value, Attrs& attrs);

// Whether the field of `id` holds a value: an optional that is set, a flag
// that is true, a list or string that is not empty.
bool hasAttr(AttrId id, const Attrs& attrs);

// The field of `id` as JSON.
nlohmann::json writeAttr(AttrId id, const Attrs& attrs);

}  // namespace internal
}  // namespace loom::plan

#endif  // LOOM_PLAN_ATTRS_CODEC_H_
