// libFuzzer target for the mesh specs users type: DeviceMesh::parse (the
// `--mesh` of mesh-info, comm-bench and the rank binaries) and the plan
// tool's --mesh/--axes pair (tools/plan/plan_pipeline.h, meshSpec). Besides
// crashes and sanitizer reports it checks properties: a parsed mesh written
// back as a spec parses to the same mesh, its groups partition its ranks,
// and a spec meshSpec accepts is one DeviceMesh::parse accepts.
//
// Input: one byte picking the entry point, then text. For meshSpec the text
// is "MESH\nAXES".
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/device_mesh.h"
#include "tools/plan/plan_pipeline.h"

namespace {

using loom::mesh::DeviceMesh;

// Meshes with more devices than this are parsed but not explored (every
// group of a 2^24-device mesh would take seconds per input).
constexpr int64_t kExploreLimit = 4096;

void check(bool condition) {
  if (!condition) std::abort();
}

// The number of devices `text` asks for, roughly as parse() reads it
// (the sizes after '=' in name=size pairs, else the sizes between 'x's),
// saturating. parse() allocates one entry per device, so specs between 2^16
// devices and the 2^24 cap are skipped: each costs seconds and hundreds of
// MB under ASan (8^6 x 52 devices took 24 s), which is the cap's design, not
// a bug. The cap itself and overflow are still fuzzed.
bool tooLargeToParse(std::string_view text) {
  constexpr int64_t kSaturated = int64_t{1} << 40;
  const bool named = text.find('=') != std::string_view::npos;
  int64_t product = 1;
  int64_t number = -1;
  bool counting = !named;
  const auto finish = [&] {
    if (number > 0) product = number > kSaturated / product ? kSaturated : product * number;
    number = -1;
  };
  for (char c : text) {
    if (named && (c == '=' || c == ',')) {
      finish();
      counting = c == '=';
    } else if (!named && c == 'x') {
      finish();
    } else if (counting && c >= '0' && c <= '9') {
      number = std::min<int64_t>((number < 0 ? 0 : number) * 10 + (c - '0'), kSaturated);
    }
  }
  finish();
  return product > (1 << 16) && product <= (1 << 24);
}

void explore(const DeviceMesh& mesh) {
  // Written back as name=size pairs, the mesh parses to itself.
  std::vector<std::string> pairs;
  for (int64_t a = 0; a < mesh.ndim(); ++a) {
    pairs.push_back(absl::StrCat(mesh.axisNames()[a], "=", mesh.shape()[a]));
  }
  if (!pairs.empty()) {
    absl::StatusOr<DeviceMesh> again = DeviceMesh::parse(absl::StrJoin(pairs, ","));
    check(again.ok() && *again == mesh);
  }
  if (mesh.size() > kExploreLimit) return;
  for (const std::string& axis : mesh.axisNames()) {
    absl::StatusOr<std::vector<DeviceMesh::Group>> groups = mesh.groups({axis});
    check(groups.ok());
    size_t covered = 0;
    for (const DeviceMesh::Group& group : *groups) {
      check(static_cast<int64_t>(group.size()) == *mesh.axisSize(axis));
      covered += group.size();
    }
    check(static_cast<int64_t>(covered) == mesh.size());
    absl::StatusOr<DeviceMesh> slice = mesh.slice(axis, 0);
    check(slice.ok() && slice->size() * *mesh.axisSize(axis) == mesh.size());
  }
  if (mesh.ndim() >= 2) {
    absl::StatusOr<DeviceMesh> flat =
        mesh.flatten({mesh.axisNames()[0], mesh.axisNames()[1]}, "merged");
    check(flat.ok() && flat->ranks() == mesh.ranks());
  }
  for (int64_t rank : {int64_t{0}, mesh.size() - 1}) {
    absl::StatusOr<std::vector<int64_t>> coordinate = mesh.coordinateOf(rank);
    check(coordinate.ok());
    absl::StatusOr<int64_t> back = mesh.rankAt(*coordinate);
    check(back.ok() && *back == rank);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 3;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (tooLargeToParse(text)) return 0;
  if (mode == 0) {
    absl::StatusOr<DeviceMesh> mesh = DeviceMesh::parse(text);
    if (mesh.ok()) explore(*mesh);
  } else if (mode == 1) {
    const int64_t world = 1 + (size > 1 ? data[1] % 64 : 0);
    absl::StatusOr<DeviceMesh> mesh = DeviceMesh::parse(text, world);
    if (mesh.ok()) {
      check(mesh->size() == world);
      explore(*mesh);
    }
  } else {
    const size_t newline = text.find('\n');
    const std::string mesh_flag = text.substr(0, newline);
    const std::string axes_flag = newline == std::string::npos ? "" : text.substr(newline + 1);
    if (tooLargeToParse(mesh_flag)) return 0;
    absl::StatusOr<std::string> spec = loom::tools::plan::meshSpec(mesh_flag, axes_flag);
    if (spec.ok()) {
      absl::StatusOr<DeviceMesh> mesh = DeviceMesh::parse(*spec);
      check(mesh.ok());
      explore(*mesh);
    }
  }
  return 0;
}
