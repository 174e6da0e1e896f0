// The search's strategies (see strategy.h).
#include "planner/cost/strategy.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace loom::planner::cost {

std::string Strategy::meshSpec() const {
  std::vector<std::string> parts;
  if (pp > 1) parts.push_back(absl::StrCat("pp=", pp));
  if (dp > 1) parts.push_back(absl::StrCat("dp=", dp));
  if (fsdp > 1) parts.push_back(absl::StrCat("fsdp=", fsdp));
  if (tp > 1) parts.push_back(absl::StrCat("tp=", tp));
  if (parts.empty()) parts.push_back("dp=1");
  return absl::StrJoin(parts, ",");
}

std::string Strategy::axes() const {
  std::vector<std::string> parts;
  if (pp > 1) parts.push_back("pp");
  if (dp > 1) parts.push_back("dp");
  if (fsdp > 1) parts.push_back("fsdp");
  if (tp > 1) parts.push_back("tp");
  if (parts.empty()) parts.push_back("dp");
  return absl::StrJoin(parts, ",");
}

std::string Strategy::parallelism() const {
  std::vector<std::string> parts;
  if (pp > 1) {
    std::string pipeline = absl::StrCat("pp ", pp);
    if (schedule == stages::PipelineSchedule::kGpipe) absl::StrAppend(&pipeline, " gpipe");
    if (virtual_stages > 1) absl::StrAppend(&pipeline, " interleaved x", virtual_stages);
    parts.push_back(pipeline);
  }
  if (dp > 1 && fsdp > 1) {
    parts.push_back(absl::StrCat("hsdp ", dp, "x", fsdp));
  } else if (fsdp > 1) {
    parts.push_back(absl::StrCat("fsdp ", fsdp));
  } else if (dp > 1) {
    parts.push_back(absl::StrCat("dp ", dp));
  }
  if (tp > 1) parts.push_back(absl::StrCat("tp ", tp));
  if (parts.empty()) parts.push_back("single device");
  return absl::StrJoin(parts, " + ");
}

std::string Strategy::knobs() const {
  std::vector<std::string> parts;
  if (fsdp > 1) {
    parts.push_back(absl::StrCat("prefetch ", prefetch));
    parts.push_back(reshard_after_forward ? "reshard" : "keep");
    parts.push_back(bucket_mb > 0 ? absl::StrCat("bucket ", bucket_mb, " MiB") : "bucket/unit");
  }
  parts.push_back(absl::StrCat("mb ", micro_batch, "x", accumulation));
  if (keep_gathered) parts.push_back("keep gathered");
  if (defer_grad_sync) parts.push_back("defer sync");
  if (sequence_parallel) parts.push_back("sp");
  if (recompute != Recompute::kNone) {
    parts.push_back(absl::StrCat("recompute ", recomputeName(recompute)));
  }
  if (offload_optimizer) parts.push_back("offload optimizer");
  return absl::StrJoin(parts, ", ");
}

const char* recomputeName(Recompute recompute) {
  switch (recompute) {
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
    default:
      return "none";
  }
}

}  // namespace loom::planner::cost
