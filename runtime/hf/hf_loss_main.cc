// hf_loss (a test tool): loads Hugging Face weights into every rank of a
// plan (ranks as threads of this process) and prints the loss of one step
// on the synthetic batch of --data_seed, step 1, as {"loss": x}. The
// PyTorch parity test (hf_torch_parity_test.py) compares it with torch's.
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "comm/testing/process_group_testing.h"
#include "runtime/data/token_feed.h"
#include "runtime/hf/hf_executor.h"

ABSL_FLAG(std::string, plan, "", "plan.json");
ABSL_FLAG(std::string, weights, "", "a .safetensors file, an index or a directory");
ABSL_FLAG(uint64_t, data_seed, 1, "seed of the synthetic batch");

namespace loom::runtime::hf {
namespace {

int run() {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(absl::GetFlag(FLAGS_plan));
  if (!plan.ok()) {
    std::fprintf(stderr, "hf_loss: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  std::mutex mu;
  absl::Status failure;
  double loss = 0;
  comm::testing::runRanksShared(
      static_cast<int>(plan->worldSize()), [&](std::shared_ptr<comm::ProcessGroup> group) {
        auto fail = [&](const absl::Status& s) {
          std::lock_guard<std::mutex> lock(mu);
          if (failure.ok()) failure = s;
        };
        absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(*plan, group);
        if (!executor.ok()) return fail(executor.status());
        Executor& e = **executor;
        absl::StatusOr<LoadReport> report = loadHfWeights(e, absl::GetFlag(FLAGS_weights));
        if (!report.ok()) return fail(report.status());
        absl::StatusOr<std::unique_ptr<data::SyntheticTokens>> feed =
            data::SyntheticTokens::create({.seed = absl::GetFlag(FLAGS_data_seed),
                                           .vocab = e.vocab(),
                                           .seq = e.seqLength(),
                                           .global_batch = e.stepBatch()});
        if (!feed.ok()) return fail(feed.status());
        const data::RowRange rows = e.batchRows();
        std::vector<int32_t> ids(rows.count * e.seqLength()), labels(ids.size());
        if (absl::Status s = (*feed)->batch(1, rows.begin, rows.count, ids.data(), labels.data());
            !s.ok()) {
          return fail(s);
        }
        absl::StatusOr<StepResult> result = e.step(1, ids.data(), labels.data());
        if (!result.ok()) return fail(result.status());
        std::lock_guard<std::mutex> lock(mu);
        if (group->rank() == 0) loss = result->loss;
      });
  if (!failure.ok()) {
    std::fprintf(stderr, "hf_loss: %s\n", failure.ToString().c_str());
    return 1;
  }
  std::printf("{\"loss\": %.9g}\n", loss);
  return 0;
}

}  // namespace
}  // namespace loom::runtime::hf

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return loom::runtime::hf::run();
}
