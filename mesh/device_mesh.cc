// DeviceMesh construction, validation, spec parsing and the row-major index
// arithmetic behind coordinates, groups, slices and flattening.

#include "mesh/device_mesh.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace loom::mesh {
namespace {

// No cluster comes near this many ranks; a larger product is a typo, and
// refusing it keeps the rank array from exhausting memory.
constexpr int64_t kMaxDevices = int64_t{1} << 24;

constexpr int64_t kMaxRanksShown = 16;

// Debian's Abseil has its own string_view type (ABSL_OPTION_USE_STD_STRING_VIEW
// is 0), so a std::string_view must be converted before it reaches StrCat or
// SimpleAtoi.
absl::string_view asAbsl(std::string_view text) { return {text.data(), text.size()}; }

std::string shapeString(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "() (no axes)";
  return absl::StrJoin(shape, "x");
}

std::string parenthesized(const std::vector<std::string>& names) {
  return absl::StrCat("(", absl::StrJoin(names, ", "), ")");
}

bool isIdentifier(std::string_view name) {
  if (name.empty()) return false;
  if (!absl::ascii_isalpha(name[0]) && name[0] != '_') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

absl::Status checkAxisName(std::string_view name) {
  if (isIdentifier(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("axis name '", asAbsl(name),
                   "' is not an identifier; use letters, digits and '_', not "
                   "starting with a digit"));
}

// Validates shape and names together and returns the number of devices.
absl::StatusOr<int64_t> checkShape(const std::vector<int64_t>& shape,
                                   const std::vector<std::string>& axis_names) {
  if (shape.size() != axis_names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh shape ", shapeString(shape), " has ", shape.size(), " axes but names were given for ",
        axis_names.size(), ": ", parenthesized(axis_names), "; give one name per axis"));
  }
  int64_t size = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("axis '", axis_names[i], "' of mesh shape ",
                                                     shapeString(shape), " has size ", shape[i],
                                                     "; every axis size must be at least 1"));
    }
    if (shape[i] > kMaxDevices / size) {
      return absl::InvalidArgumentError(absl::StrCat("mesh shape ", shapeString(shape),
                                                     " has more than ", kMaxDevices,
                                                     " devices; check the axis sizes for a typo"));
    }
    size *= shape[i];
  }
  for (size_t i = 0; i < axis_names.size(); ++i) {
    if (absl::Status status = checkAxisName(axis_names[i]); !status.ok()) {
      return status;
    }
    for (size_t j = 0; j < i; ++j) {
      if (axis_names[i] == axis_names[j]) {
        return absl::InvalidArgumentError(
            absl::StrCat("axis name '", axis_names[i], "' is used by axes ", j, " and ", i, " of ",
                         parenthesized(axis_names), "; axis names must be unique"));
      }
    }
  }
  return size;
}

// A piece of a mesh spec with surrounding whitespace removed, and the 1-based
// column where it starts (or, when empty, where it was expected).
struct Piece {
  std::string_view text;
  size_t column;
};

Piece trimmed(std::string_view text, size_t offset) {
  size_t begin = 0;
  while (begin < text.size() && absl::ascii_isspace(text[begin])) ++begin;
  size_t end = text.size();
  while (end > begin && absl::ascii_isspace(text[end - 1])) --end;
  return Piece{text.substr(begin, end - begin), offset + begin + 1};
}

std::vector<Piece> splitPieces(std::string_view text, char separator, size_t offset) {
  std::vector<Piece> pieces;
  size_t start = 0;
  while (true) {
    size_t next = text.find(separator, start);
    std::string_view part =
        text.substr(start, next == std::string_view::npos ? std::string_view::npos : next - start);
    pieces.push_back(trimmed(part, offset + start));
    if (next == std::string_view::npos) return pieces;
    start = next + 1;
  }
}

constexpr absl::string_view kSpecHint = R"(; write a spec like "2x4" or "dp=2,tp=4")";

absl::Status specError(std::string_view spec, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("mesh spec \"", asAbsl(spec), "\": ", what));
}

absl::StatusOr<int64_t> parseSize(std::string_view spec, const Piece& piece) {
  if (piece.text.empty()) {
    return specError(spec,
                     absl::StrCat("missing an axis size at column ", piece.column, kSpecHint));
  }
  std::string_view digits = piece.text;
  if (digits.front() == '-') digits.remove_prefix(1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit)) {
    return specError(spec, absl::StrCat("axis size '", asAbsl(piece.text), "' at column ",
                                        piece.column, " is not a whole number", kSpecHint));
  }
  int64_t size = 0;
  if (!absl::SimpleAtoi(asAbsl(piece.text), &size) || size > kMaxDevices) {
    return specError(spec,
                     absl::StrCat("axis size '", asAbsl(piece.text), "' at column ", piece.column,
                                  " is out of range; an axis has 1 to ", kMaxDevices, " devices"));
  }
  if (size < 1) {
    return specError(
        spec, absl::StrCat("axis size ", size, " at column ", piece.column, " must be at least 1"));
  }
  return size;
}

}  // namespace

DeviceMesh::DeviceMesh(std::vector<int64_t> shape, std::vector<std::string> axis_names,
                       std::vector<int64_t> ranks)
    : shape_(std::move(shape)),
      axis_names_(std::move(axis_names)),
      ranks_(std::move(ranks)),
      strides_(shape_.size()) {
  int64_t stride = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    strides_[i] = stride;
    stride *= shape_[i];
  }
  // Ranks 0..n-1 in order (create) are their own indices: the search
  // builds thousand-device meshes per candidate, so it builds no index.
  bool identity = true;
  for (size_t i = 0; i < ranks_.size() && identity; ++i) {
    identity = ranks_[i] == static_cast<int64_t>(i);
  }
  if (identity) return;
  index_by_rank_.reserve(ranks_.size());
  for (size_t i = 0; i < ranks_.size(); ++i) {
    index_by_rank_.emplace_back(ranks_[i], static_cast<int64_t>(i));
  }
  std::sort(index_by_rank_.begin(), index_by_rank_.end());
}

absl::StatusOr<DeviceMesh> DeviceMesh::create(std::vector<int64_t> shape,
                                              std::vector<std::string> axis_names) {
  absl::StatusOr<int64_t> size = checkShape(shape, axis_names);
  if (!size.ok()) return size.status();
  std::vector<int64_t> ranks(*size);
  std::iota(ranks.begin(), ranks.end(), 0);
  return DeviceMesh(std::move(shape), std::move(axis_names), std::move(ranks));
}

absl::StatusOr<DeviceMesh> DeviceMesh::createWithRanks(std::vector<int64_t> shape,
                                                       std::vector<std::string> axis_names,
                                                       std::vector<int64_t> ranks) {
  absl::StatusOr<int64_t> size = checkShape(shape, axis_names);
  if (!size.ok()) return size.status();
  if (static_cast<int64_t>(ranks.size()) != *size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh shape ", shapeString(shape), " has ", *size, " devices but ", ranks.size(),
        " ranks were given; give one rank per device in row-major order"));
  }
  std::vector<std::pair<int64_t, size_t>> sorted;
  sorted.reserve(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", ranks[i], " at index ", i,
                                                     " is negative; ranks must be non-negative"));
    }
    sorted.emplace_back(ranks[i], i);
  }
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].first == sorted[i - 1].first) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", sorted[i].first, " appears at indices ", sorted[i - 1].second,
                       " and ", sorted[i].second, "; each rank may appear only once"));
    }
  }
  return DeviceMesh(std::move(shape), std::move(axis_names), std::move(ranks));
}

absl::StatusOr<DeviceMesh> DeviceMesh::parse(std::string_view spec) {
  if (trimmed(spec, 0).text.empty()) {
    return specError(spec, absl::StrCat("the spec is empty", kSpecHint));
  }
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  if (spec.find('=') == std::string_view::npos) {
    for (const Piece& piece : splitPieces(spec, 'x', 0)) {
      absl::StatusOr<int64_t> size = parseSize(spec, piece);
      if (!size.ok()) return size.status();
      names.push_back(absl::StrCat("d", shape.size()));
      shape.push_back(*size);
    }
  } else {
    std::vector<size_t> name_columns;
    for (const Piece& piece : splitPieces(spec, ',', 0)) {
      if (piece.text.empty()) {
        return specError(spec, absl::StrCat("missing an axis at column ", piece.column,
                                            "; write name=size pairs separated by ',', "
                                            "e.g. \"dp=2,tp=4\""));
      }
      size_t equals = piece.text.find('=');
      if (equals == std::string_view::npos) {
        return specError(spec,
                         absl::StrCat("axis '", asAbsl(piece.text), "' at column ", piece.column,
                                      " has no size; write name=size, "
                                      "e.g. \"dp=2\""));
      }
      Piece name = trimmed(piece.text.substr(0, equals), piece.column - 1);
      Piece size_piece = trimmed(piece.text.substr(equals + 1), piece.column + equals);
      if (name.text.empty()) {
        return specError(
            spec, absl::StrCat("missing an axis name before '=' at column ", piece.column + equals,
                               "; write name=size, "
                               "e.g. \"dp=2\""));
      }
      if (!isIdentifier(name.text)) {
        return specError(spec,
                         absl::StrCat("axis name '", asAbsl(name.text), "' at column ", name.column,
                                      " is not an identifier; use "
                                      "letters, digits and '_', not starting with a "
                                      "digit"));
      }
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == name.text) {
          return specError(spec, absl::StrCat("axis name '", asAbsl(name.text), "' at column ",
                                              name.column, " is already used at column ",
                                              name_columns[i], "; axis names must be unique"));
        }
      }
      absl::StatusOr<int64_t> size = parseSize(spec, size_piece);
      if (!size.ok()) return size.status();
      names.emplace_back(name.text);
      name_columns.push_back(name.column);
      shape.push_back(*size);
    }
  }
  absl::StatusOr<DeviceMesh> mesh = create(std::move(shape), std::move(names));
  if (!mesh.ok()) return specError(spec, mesh.status().message());
  return mesh;
}

absl::StatusOr<DeviceMesh> DeviceMesh::parse(std::string_view spec, int64_t world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", world_size, " must be at least 1"));
  }
  absl::StatusOr<DeviceMesh> mesh = parse(spec);
  if (!mesh.ok()) return mesh.status();
  if (mesh->size() != world_size) {
    return specError(spec, absl::StrCat("mesh shape ", shapeString(mesh->shape()), " has ",
                                        mesh->size(), " devices but world size is ", world_size,
                                        "; pick axis sizes whose product is ", world_size));
  }
  return mesh;
}

bool DeviceMesh::hasAxis(std::string_view name) const {
  return std::find(axis_names_.begin(), axis_names_.end(), name) != axis_names_.end();
}

absl::StatusOr<int64_t> DeviceMesh::axisIndex(std::string_view name) const {
  auto it = std::find(axis_names_.begin(), axis_names_.end(), name);
  if (it == axis_names_.end()) {
    return absl::NotFoundError(absl::StrCat(toString(), " has no axis '", asAbsl(name),
                                            "'; its axes are ", parenthesized(axis_names_)));
  }
  return it - axis_names_.begin();
}

absl::StatusOr<int64_t> DeviceMesh::axisSize(std::string_view name) const {
  absl::StatusOr<int64_t> index = axisIndex(name);
  if (!index.ok()) return index.status();
  return shape_[*index];
}

bool DeviceMesh::contains(int64_t rank) const { return indexOf(rank).ok(); }

absl::StatusOr<int64_t> DeviceMesh::indexOf(int64_t rank) const {
  if (index_by_rank_.empty() && rank >= 0 && rank < size()) return rank;
  auto it = std::lower_bound(index_by_rank_.begin(), index_by_rank_.end(),
                             std::pair<int64_t, int64_t>(rank, 0));
  if (it == index_by_rank_.end() || it->first != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in ", toString(),
                     "; use one of the mesh's ranks, e.g. from ranks()"));
  }
  return it->second;
}

absl::StatusOr<std::vector<int64_t>> DeviceMesh::coordinateOf(int64_t rank) const {
  absl::StatusOr<int64_t> index = indexOf(rank);
  if (!index.ok()) return index.status();
  std::vector<int64_t> coordinate(shape_.size());
  for (size_t a = 0; a < shape_.size(); ++a) {
    coordinate[a] = (*index / strides_[a]) % shape_[a];
  }
  return coordinate;
}

absl::StatusOr<int64_t> DeviceMesh::rankAt(const std::vector<int64_t>& coordinate) const {
  if (coordinate.size() != shape_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "coordinate (", absl::StrJoin(coordinate, ", "), ") has ", coordinate.size(),
        " entries but ", toString(), " has ", shape_.size(), " axes; give one entry per axis"));
  }
  int64_t index = 0;
  for (size_t a = 0; a < shape_.size(); ++a) {
    if (coordinate[a] < 0 || coordinate[a] >= shape_[a]) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordinate ", coordinate[a], " on axis '", axis_names_[a], "' of ",
                       toString(), " is out of range; it must be in [0, ", shape_[a], ")"));
    }
    index += coordinate[a] * strides_[a];
  }
  return ranks_[index];
}

absl::StatusOr<std::vector<int64_t>> DeviceMesh::resolveAxes(
    const std::vector<std::string>& axes) const {
  std::vector<int64_t> indices;
  indices.reserve(axes.size());
  for (const std::string& axis : axes) {
    absl::StatusOr<int64_t> index = axisIndex(axis);
    if (!index.ok()) return index.status();
    if (std::find(indices.begin(), indices.end(), *index) != indices.end()) {
      return absl::InvalidArgumentError(absl::StrCat("axis '", axis, "' is listed twice in ",
                                                     parenthesized(axes), "; list each once"));
    }
    indices.push_back(*index);
  }
  return indices;
}

int64_t DeviceMesh::offsetAlong(const std::vector<int64_t>& axes, int64_t flat) const {
  int64_t offset = 0;
  for (size_t i = axes.size(); i-- > 0;) {
    int64_t axis = axes[i];
    offset += (flat % shape_[axis]) * strides_[axis];
    flat /= shape_[axis];
  }
  return offset;
}

DeviceMesh::Group DeviceMesh::collectGroup(int64_t base, const std::vector<int64_t>& axes) const {
  int64_t group_size = 1;
  for (int64_t axis : axes) group_size *= shape_[axis];
  Group group;
  group.reserve(group_size);
  for (int64_t k = 0; k < group_size; ++k) group.push_back(ranks_[base + offsetAlong(axes, k)]);
  return group;
}

absl::StatusOr<std::vector<DeviceMesh::Group>> DeviceMesh::groups(
    const std::vector<std::string>& axes) const {
  absl::StatusOr<std::vector<int64_t>> along = resolveAxes(axes);
  if (!along.ok()) return along.status();
  std::vector<int64_t> rest;
  int64_t num_groups = 1;
  for (int64_t a = 0; a < ndim(); ++a) {
    if (std::find(along->begin(), along->end(), a) == along->end()) {
      rest.push_back(a);
      num_groups *= shape_[a];
    }
  }
  std::vector<Group> result;
  result.reserve(num_groups);
  for (int64_t g = 0; g < num_groups; ++g) {
    result.push_back(collectGroup(offsetAlong(rest, g), *along));
  }
  return result;
}

absl::StatusOr<DeviceMesh::Group> DeviceMesh::groupOf(int64_t rank,
                                                      const std::vector<std::string>& axes) const {
  absl::StatusOr<std::vector<int64_t>> along = resolveAxes(axes);
  if (!along.ok()) return along.status();
  absl::StatusOr<int64_t> index = indexOf(rank);
  if (!index.ok()) return index.status();
  int64_t base = *index;
  for (int64_t a : *along) base -= (*index / strides_[a]) % shape_[a] * strides_[a];
  return collectGroup(base, *along);
}

absl::StatusOr<DeviceMesh> DeviceMesh::slice(std::string_view axis, int64_t index) const {
  absl::StatusOr<int64_t> sliced = axisIndex(axis);
  if (!sliced.ok()) return sliced.status();
  if (index < 0 || index >= shape_[*sliced]) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice index ", index, " on axis '", asAbsl(axis), "' of ", toString(),
                     " is out of range; it must be in [0, ", shape_[*sliced], ")"));
  }
  std::vector<int64_t> rest;
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  for (int64_t a = 0; a < ndim(); ++a) {
    if (a == *sliced) continue;
    rest.push_back(a);
    shape.push_back(shape_[a]);
    names.push_back(axis_names_[a]);
  }
  return DeviceMesh(std::move(shape), std::move(names),
                    collectGroup(index * strides_[*sliced], rest));
}

absl::StatusOr<DeviceMesh> DeviceMesh::subMesh(int64_t rank,
                                               const std::vector<std::string>& axes) const {
  absl::StatusOr<Group> group = groupOf(rank, axes);
  if (!group.ok()) return group.status();
  std::vector<int64_t> shape;
  shape.reserve(axes.size());
  for (const std::string& axis : axes) shape.push_back(shape_[*axisIndex(axis)]);
  return DeviceMesh(std::move(shape), axes, *std::move(group));
}

absl::StatusOr<DeviceMesh> DeviceMesh::flatten(const std::vector<std::string>& axes,
                                               std::string new_name) const {
  if (axes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("flatten of ", toString(), " into '", new_name,
                                                   "' lists no axes; name at least one"));
  }
  absl::StatusOr<std::vector<int64_t>> merged = resolveAxes(axes);
  if (!merged.ok()) return merged.status();
  for (size_t i = 1; i < merged->size(); ++i) {
    if ((*merged)[i] == (*merged)[i - 1] + 1) continue;
    std::vector<int64_t> sorted = *merged;
    std::sort(sorted.begin(), sorted.end());
    bool adjacent_when_sorted =
        sorted.back() - sorted.front() + 1 == static_cast<int64_t>(sorted.size());
    if (adjacent_when_sorted) {
      std::vector<std::string> in_order;
      for (int64_t a : sorted) in_order.push_back(axis_names_[a]);
      return absl::InvalidArgumentError(absl::StrCat(
          "axes ", parenthesized(axes), " of ", toString(),
          " are not listed in mesh order; flatten ", parenthesized(in_order), " instead"));
    }
    return absl::InvalidArgumentError(absl::StrCat("axes ", parenthesized(axes), " of ", toString(),
                                                   " are not neighbours; only adjacent axes can be "
                                                   "flattened, because a merged axis "
                                                   "must keep the row-major rank order"));
  }
  if (absl::Status status = checkAxisName(new_name); !status.ok()) {
    return status;
  }
  int64_t first = merged->front();
  int64_t last = merged->back();
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  for (int64_t a = 0; a < ndim(); ++a) {
    if (a > first && a <= last) {
      shape.back() *= shape_[a];
      continue;
    }
    if (a == first) {
      shape.push_back(shape_[a]);
      names.push_back(new_name);
      continue;
    }
    if (axis_names_[a] == new_name) {
      return absl::InvalidArgumentError(absl::StrCat("new axis name '", new_name,
                                                     "' is already used by another axis of ",
                                                     toString(), "; pick a different name"));
    }
    shape.push_back(shape_[a]);
    names.push_back(axis_names_[a]);
  }
  return DeviceMesh(std::move(shape), std::move(names), ranks_);
}

std::string DeviceMesh::toString() const {
  std::vector<std::string> axes;
  axes.reserve(shape_.size());
  for (size_t a = 0; a < shape_.size(); ++a) {
    axes.push_back(absl::StrCat(axis_names_[a], "=", shape_[a]));
  }
  std::string result = absl::StrCat("mesh<", absl::StrJoin(axes, ", "), ">");
  bool default_ranks = true;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    default_ranks = default_ranks && ranks_[i] == static_cast<int64_t>(i);
  }
  if (default_ranks) return result;
  if (size() <= kMaxRanksShown) {
    return absl::StrCat(result, "[", absl::StrJoin(ranks_, ", "), "]");
  }
  std::vector<int64_t> head(ranks_.begin(), ranks_.begin() + kMaxRanksShown / 2);
  return absl::StrCat(result, "[", absl::StrJoin(head, ", "), ", ... (", size(), " ranks)]");
}

}  // namespace loom::mesh
