// parity: finds the first tensor where two training runs diverge.
//
//   train --plan=A/plan.json --dump_dir=/tmp/a ...; train --plan=B/plan.json --dump_dir=/tmp/b ...
//   parity --a=/tmp/a --b=/tmp/b [--rtol=0]
//
// Both dumps hold, per step, the gradients before the optimizer (DIR/grads)
// and the parameters and optimizer states after it with the step's loss
// (DIR/params), as sharded checkpoints; each tensor is read whole, so runs
// under different meshes compare. Steps are walked in order, and within a
// step the loss, then the gradients, then the parameters, each in the
// order the plan defines them: the first difference is where the runs
// part, everything after it follows from it.
#include <dirent.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/checkpoint/checkpoint_reader.h"

ABSL_FLAG(std::string, a, "", "the first run's --dump_dir");
ABSL_FLAG(std::string, b, "", "the second run's --dump_dir");
ABSL_FLAG(
    double, rtol, 0.0,
    "relative tolerance (of the tensor's largest magnitude); 0 asks for bit-identical values");

namespace loom::parity {
namespace {

using runtime::checkpoint::Box;
using runtime::checkpoint::CheckpointReader;

std::set<int64_t> stepsIn(const std::string& dir) {
  std::set<int64_t> steps;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name.rfind("step_", 0) == 0) steps.insert(std::stoll(name.substr(5)));
    }
    closedir(d);
  }
  return steps;
}

absl::StatusOr<std::vector<float>> readWhole(const CheckpointReader& reader,
                                             const std::string& name) {
  absl::StatusOr<runtime::checkpoint::TensorInfo> info = reader.tensor(name);
  if (!info.ok()) return info.status();
  Box box{std::vector<int64_t>(info->shape.size(), 0), info->shape};
  int64_t n = 1;
  for (int64_t d : info->shape) n *= d;
  std::vector<float> values(n);
  if (absl::Status s = reader.readInto(name, box, values.data()); !s.ok()) return s;
  return values;
}

// Empty when equal (within rtol); else a description of the difference.
std::string difference(const std::vector<float>& a, const std::vector<float>& b, double rtol) {
  if (a.size() != b.size()) return absl::StrCat("sizes differ: ", a.size(), " vs ", b.size());
  double scale = 0, worst = 0;
  int64_t first = -1, count = 0;
  for (size_t i = 0; i < a.size(); ++i)
    scale = std::max(scale, static_cast<double>(std::abs(b[i])));
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    const bool differs = rtol == 0 ? a[i] != b[i] : d > rtol * scale;
    if (!differs) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    ++count;
    worst = std::max(worst, d);
  }
  if (first < 0) return "";
  return absl::StrCat(count, " of ", a.size(), " elements differ, first at flat index ", first,
                      " (", a[first], " vs ", b[first], "), largest difference ", worst, " (",
                      scale > 0 ? worst / scale : 0.0, " of the largest magnitude)");
}

absl::Status compare(const std::string& a, const std::string& b, double rtol) {
  const std::set<int64_t> stepsA = stepsIn(a + "/params"), stepsB = stepsIn(b + "/params");
  int64_t compared = 0;
  for (int64_t step : stepsA) {
    if (!stepsB.count(step)) continue;
    ++compared;
    for (const char* kind : {"grads", "params"}) {
      absl::StatusOr<CheckpointReader> ra =
          CheckpointReader::open(absl::StrCat(a, "/", kind), step);
      absl::StatusOr<CheckpointReader> rb =
          CheckpointReader::open(absl::StrCat(b, "/", kind), step);
      if (!ra.ok()) return ra.status();
      if (!rb.ok()) return rb.status();
      if (std::string(kind) == "grads") {
        // The loss is in the params dump's metadata; check it first.
        absl::StatusOr<CheckpointReader> pa = CheckpointReader::open(a + "/params", step);
        absl::StatusOr<CheckpointReader> pb = CheckpointReader::open(b + "/params", step);
        if (!pa.ok()) return pa.status();
        if (!pb.ok()) return pb.status();
        const float la = pa->metadata().value("loss", 0.0f),
                    lb = pb->metadata().value("loss", 0.0f);
        if (std::string d = difference({la}, {lb}, rtol); !d.empty()) {
          std::printf("first divergence: step %lld, the loss: %.9g vs %.9g\n",
                      static_cast<long long>(step), la, lb);
          return absl::OkStatus();
        }
      }
      for (const std::string& name : ra->tensorNames()) {
        absl::StatusOr<std::vector<float>> va = readWhole(*ra, name);
        absl::StatusOr<std::vector<float>> vb = readWhole(*rb, name);
        if (!va.ok()) return va.status();
        if (!vb.ok())
          return absl::NotFoundError(
              absl::StrCat(b, "/", kind, " step ", step, ": ", vb.status().message()));
        if (std::string d = difference(*va, *vb, rtol); !d.empty()) {
          std::printf("first divergence: step %lld, %s %s: %s\n", static_cast<long long>(step),
                      std::string(kind) == "grads" ? "gradient" : "after the update,", name.c_str(),
                      d.c_str());
          return absl::OkStatus();
        }
      }
    }
  }
  if (compared == 0) {
    return absl::NotFoundError(absl::StrCat("no step dumped in both ", a, " and ", b,
                                            "; run //tools:train with --dump_dir on both"));
  }
  std::printf("identical%s over %lld steps: losses, gradients, parameters and optimizer states\n",
              rtol == 0 ? " bit for bit" : absl::StrCat(" within rtol ", rtol).c_str(),
              static_cast<long long>(compared));
  return absl::OkStatus();
}

}  // namespace
}  // namespace loom::parity

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "parity --a=DUMP_A --b=DUMP_B [--rtol=0]: the first tensor where two runs differ");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_a).empty() || absl::GetFlag(FLAGS_b).empty()) {
    std::fprintf(stderr,
                 "parity: --a and --b are required (two //tools:train --dump_dir directories)\n");
    return 2;
  }
  if (absl::Status s = loom::parity::compare(absl::GetFlag(FLAGS_a), absl::GetFlag(FLAGS_b),
                                             absl::GetFlag(FLAGS_rtol));
      !s.ok()) {
    std::fprintf(stderr, "parity: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
