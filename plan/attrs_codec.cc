// Typed attributes as JSON (attrs_codec.h): one codec per value type, one
// generic field accessor per member kind, and one switch from AttrId to its
// member, so adding an attribute is a line here and a line in op_table.cc.
#include "plan/attrs_codec.h"

#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace loom::plan {
namespace internal {
namespace {

using json = nlohmann::json;

absl::Status wrongType(const char* expected, const json& got) {
  std::string text = got.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return absl::InvalidArgumentError(absl::StrCat("must be ", expected, ", got ", text));
}

// Codec<T>: a JSON value to T and back.
template <typename T>
struct Codec;

template <>
struct Codec<int64_t> {
  static absl::StatusOr<int64_t> read(const json& v) {
    if (!v.is_number_integer()) return wrongType("an integer", v);
    return v.get<int64_t>();
  }
  static json write(int64_t v) { return v; }
};

template <>
struct Codec<double> {
  static absl::StatusOr<double> read(const json& v) {
    if (!v.is_number()) return wrongType("a number", v);
    return v.get<double>();
  }
  static json write(double v) { return v; }
};

template <>
struct Codec<bool> {
  static absl::StatusOr<bool> read(const json& v) {
    if (!v.is_boolean()) return wrongType("true or false", v);
    return v.get<bool>();
  }
  static json write(bool v) { return v; }
};

template <>
struct Codec<std::string> {
  static absl::StatusOr<std::string> read(const json& v) {
    if (!v.is_string()) return wrongType("a string", v);
    return v.get<std::string>();
  }
  static json write(const std::string& v) { return v; }
};

template <>
struct Codec<comm::DType> {
  static absl::StatusOr<comm::DType> read(const json& v) {
    if (!v.is_string()) return wrongType("a dtype name such as \"f32\"", v);
    return comm::dtypeFromName(v.get<std::string>());
  }
  static json write(comm::DType v) { return std::string(comm::dtypeName(v)); }
};

template <>
struct Codec<comm::ReduceOp> {
  static absl::StatusOr<comm::ReduceOp> read(const json& v) {
    for (comm::ReduceOp op :
         {comm::ReduceOp::kSum, comm::ReduceOp::kAvg, comm::ReduceOp::kMax, comm::ReduceOp::kMin}) {
      if (v.is_string() && v.get<std::string>() == comm::reduceOpName(op)) return op;
    }
    return wrongType("\"sum\", \"avg\", \"max\" or \"min\"", v);
  }
  static json write(comm::ReduceOp v) { return std::string(comm::reduceOpName(v)); }
};

template <>
struct Codec<Placement> {
  static absl::StatusOr<Placement> read(const json& v) {
    if (!v.is_array()) return wrongType("a list of per-axis placements", v);
    Placement out;
    for (const json& entry : v) {
      if (!entry.is_string()) return wrongType("a list of per-axis placements", v);
      absl::StatusOr<AxisPlacement> axis = AxisPlacement::parse(entry.get<std::string>());
      if (!axis.ok()) return axis.status();
      out.push_back(*axis);
    }
    return out;
  }
  static json write(const Placement& v) {
    json out = json::array();
    for (const AxisPlacement& axis : v) out.push_back(axis.toString());
    return out;
  }
};

template <typename T>
struct Codec<std::vector<T>> {
  static absl::StatusOr<std::vector<T>> read(const json& v) {
    if (!v.is_array()) return wrongType("a list", v);
    std::vector<T> out;
    for (const json& entry : v) {
      absl::StatusOr<T> item = Codec<T>::read(entry);
      if (!item.ok()) return item.status();
      out.push_back(*std::move(item));
    }
    return out;
  }
  static json write(const std::vector<T>& v) {
    json out = json::array();
    for (const T& item : v) out.push_back(Codec<T>::write(item));
    return out;
  }
};

// Field<M>: a member of kind M (an optional, a flag, a list or a string):
// its value type, how it is set, and whether it holds a value.
template <typename M>
struct Field {
  using Value = M;
  static void set(M& member, M value) { member = std::move(value); }
  static bool present(const M& member) { return !member.empty(); }
  static const M& get(const M& member) { return member; }
};

template <typename T>
struct Field<std::optional<T>> {
  using Value = T;
  static void set(std::optional<T>& member, T value) { member = std::move(value); }
  static bool present(const std::optional<T>& member) { return member.has_value(); }
  static const T& get(const std::optional<T>& member) { return *member; }
};

template <>
struct Field<bool> {
  using Value = bool;
  static void set(bool& member, bool value) { member = value; }
  static bool present(bool member) { return member; }
  static bool get(bool member) { return member; }
};

// What one attribute's member supports, bound to the member.
struct Accessor {
  absl::Status (*read)(const json&, Attrs&);
  bool (*present)(const Attrs&);
  json (*write)(const Attrs&);
};

template <auto Member>
Accessor accessor() {
  using M = std::remove_cvref_t<decltype(std::declval<Attrs&>().*Member)>;
  using V = typename Field<M>::Value;
  return {
      .read = [](const json& v, Attrs& a) -> absl::Status {
        absl::StatusOr<V> value = Codec<V>::read(v);
        if (!value.ok()) return value.status();
        Field<M>::set(a.*Member, *std::move(value));
        return absl::OkStatus();
      },
      .present = [](const Attrs& a) { return Field<M>::present(a.*Member); },
      .write = [](const Attrs& a) { return Codec<V>::write(Field<M>::get(a.*Member)); },
  };
}

Accessor accessorOf(AttrId id) {
  switch (id) {
    case AttrId::kEpsilon:
      return accessor<&Attrs::epsilon>();
    case AttrId::kTheta:
      return accessor<&Attrs::theta>();
    case AttrId::kInverse:
      return accessor<&Attrs::inverse>();
    case AttrId::kScalingFactor:
      return accessor<&Attrs::scaling_factor>();
    case AttrId::kLowFreqFactor:
      return accessor<&Attrs::low_freq_factor>();
    case AttrId::kHighFreqFactor:
      return accessor<&Attrs::high_freq_factor>();
    case AttrId::kOriginalMaxPositions:
      return accessor<&Attrs::original_max_positions>();
    case AttrId::kTransposeLhs:
      return accessor<&Attrs::transpose_lhs>();
    case AttrId::kTransposeRhs:
      return accessor<&Attrs::transpose_rhs>();
    case AttrId::kScale:
      return accessor<&Attrs::scale>();
    case AttrId::kVocab:
      return accessor<&Attrs::vocab>();
    case AttrId::kDims:
      return accessor<&Attrs::dims>();
    case AttrId::kPermutation:
      return accessor<&Attrs::permutation>();
    case AttrId::kOperandPlacements:
      return accessor<&Attrs::operand_placements>();
    case AttrId::kResultPlacements:
      return accessor<&Attrs::result_placements>();
    case AttrId::kMeshAxes:
      return accessor<&Attrs::mesh_axes>();
    case AttrId::kWireType:
      return accessor<&Attrs::wire_type>();
    case AttrId::kAccumType:
      return accessor<&Attrs::accum_type>();
    case AttrId::kReduction:
      return accessor<&Attrs::reduction>();
    case AttrId::kPadded:
      return accessor<&Attrs::padded>();
    case AttrId::kGatherDim:
      return accessor<&Attrs::gather_dim>();
    case AttrId::kScatterDim:
      return accessor<&Attrs::scatter_dim>();
    case AttrId::kSplitDim:
      return accessor<&Attrs::split_dim>();
    case AttrId::kConcatDim:
      return accessor<&Attrs::concat_dim>();
    case AttrId::kGroupSize:
      return accessor<&Attrs::group_size>();
    case AttrId::kBytes:
      return accessor<&Attrs::bytes>();
    case AttrId::kAsyncHandle:
      return accessor<&Attrs::async_handle>();
    case AttrId::kChunks:
      return accessor<&Attrs::chunks>();
    case AttrId::kOffsets:
      return accessor<&Attrs::offsets>();
    case AttrId::kSplitDims:
      return accessor<&Attrs::split_dims>();
    case AttrId::kSliceDim:
      return accessor<&Attrs::slice_dim>();
    case AttrId::kPeer:
      return accessor<&Attrs::peer>();
    case AttrId::kTag:
      return accessor<&Attrs::tag>();
    case AttrId::kLr:
      return accessor<&Attrs::lr>();
    case AttrId::kBeta1:
      return accessor<&Attrs::beta1>();
    case AttrId::kBeta2:
      return accessor<&Attrs::beta2>();
    case AttrId::kEps:
      return accessor<&Attrs::eps>();
    case AttrId::kWeightDecay:
      return accessor<&Attrs::weight_decay>();
  }
  return accessor<&Attrs::epsilon>();
}

}  // namespace

std::optional<AttrId> attrFromName(std::string_view key) {
  // Every exported instruction looks up each of its attributes by name.
  static const std::unordered_map<std::string_view, AttrId>* const byName = [] {
    auto* names = new std::unordered_map<std::string_view, AttrId>();
    for (int i = 0; i < kNumAttrs; ++i) {
      names->emplace(attrName(static_cast<AttrId>(i)), static_cast<AttrId>(i));
    }
    return names;
  }();
  auto it = byName->find(key);
  if (it == byName->end()) return std::nullopt;
  return it->second;
}

absl::Status readAttr(AttrId id, const json& value, Attrs& attrs) {
  return accessorOf(id).read(value, attrs);
}

bool hasAttr(AttrId id, const Attrs& attrs) { return accessorOf(id).present(attrs); }

json writeAttr(AttrId id, const Attrs& attrs) { return accessorOf(id).write(attrs); }

}  // namespace internal

absl::Status setAttrFromJson(Instruction& in, std::string_view key, const nlohmann::json& value) {
  std::optional<AttrId> id = internal::attrFromName(key);
  if (!id || in.info->findAttr(*id) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(in.op, " has no attribute '", std::string(key),
                     "' in the plan op table (plan/op_table.cc); "
                     "add it there, with its field in plan::Attrs, to carry it into plan.json"));
  }
  if (absl::Status s = internal::readAttr(*id, value, in.attrs); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(in.op, " attribute '", std::string(key), "' ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace loom::plan
