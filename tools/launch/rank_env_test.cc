// Tests detectRankEnv on the variable sets of torchrun, Open MPI and Slurm,
// their precedence, and every way a set can be incomplete or inconsistent.
#include "tools/launch/rank_env.h"

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::launch {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Env = std::map<std::string, std::string>;

absl::StatusOr<RankEnv> detect(const Env& env, RankEnvOptions options = {}) {
  options.getenv = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return detectRankEnv(options);
}

const Env kTorchrun = {{"RANK", "3"},
                       {"WORLD_SIZE", "8"},
                       {"LOCAL_RANK", "1"},
                       {"MASTER_ADDR", "node0"},
                       {"MASTER_PORT", "29400"}};
const Env kOpenMpi = {{"OMPI_COMM_WORLD_RANK", "5"},
                      {"OMPI_COMM_WORLD_SIZE", "6"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}};
const Env kSlurm = {{"SLURM_PROCID", "7"},
                    {"SLURM_NTASKS", "16"},
                    {"SLURM_LOCALID", "3"},
                    {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.4"}};

Env with(Env env, const std::string& name, const std::string& value) {
  env[name] = value;
  return env;
}

Env without(Env env, const std::string& name) {
  env.erase(name);
  return env;
}

TEST(RankEnvTest, ReadsTorchrunVariables) {
  absl::StatusOr<RankEnv> env = detect(kTorchrun);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, RankEnvSource::kTorchrun);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->master_addr, "node0");
  EXPECT_EQ(env->master_port, 29400);
}

TEST(RankEnvTest, ReadsOpenMpiVariablesWithDefaultMaster) {
  absl::StatusOr<RankEnv> env = detect(kOpenMpi);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, RankEnvSource::kOpenMpi);
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 6);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(RankEnvTest, OpenMpiTakesExportedMasterOverDefaults) {
  RankEnvOptions options;
  options.default_master_addr = "unused";
  options.default_master_port = 1;
  absl::StatusOr<RankEnv> env =
      detect(with(with(kOpenMpi, "MASTER_ADDR", "head"), "MASTER_PORT", "4000"), options);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "head");
  EXPECT_EQ(env->master_port, 4000);
}

TEST(RankEnvTest, ReadsSlurmVariablesWithLaunchNodeAsMaster) {
  absl::StatusOr<RankEnv> env = detect(kSlurm);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->source, RankEnvSource::kSlurm);
  EXPECT_EQ(env->rank, 7);
  EXPECT_EQ(env->world_size, 16);
  EXPECT_EQ(env->local_rank, 3);
  EXPECT_EQ(env->master_addr, "10.0.0.4");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(RankEnvTest, SlurmPrefersMasterAddrThenFallsBackToDefault) {
  absl::StatusOr<RankEnv> exported = detect(with(kSlurm, "MASTER_ADDR", "n1"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->master_addr, "n1");

  RankEnvOptions options;
  options.default_master_addr = "fallback";
  absl::StatusOr<RankEnv> fallback = detect(without(kSlurm, "SLURM_LAUNCH_NODE_IPADDR"), options);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->master_addr, "fallback");
}

TEST(RankEnvTest, ReadsHowManyRanksShareTheMachine) {
  EXPECT_EQ(detect(kTorchrun)->local_world_size, 1);
  EXPECT_EQ(detect(with(kTorchrun, "LOCAL_WORLD_SIZE", "4"))->local_world_size, 4);
  EXPECT_EQ(detect(with(kOpenMpi, "OMPI_COMM_WORLD_LOCAL_SIZE", "3"))->local_world_size, 3);
  EXPECT_EQ(detect(with(kSlurm, "SLURM_NTASKS_PER_NODE", "8"))->local_world_size, 8);
  EXPECT_THAT(detect(with(kTorchrun, "LOCAL_WORLD_SIZE", "1")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("LOCAL_WORLD_SIZE is 1, but LOCAL_RANK is 1")));
  EXPECT_THAT(detect(with(kTorchrun, "LOCAL_WORLD_SIZE", "four")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("LOCAL_WORLD_SIZE is 'four'; it must be a whole number")));
}

TEST(RankEnvTest, TorchrunWinsOverMpiWhichWinsOverSlurm) {
  Env all = kSlurm;
  all.insert(kOpenMpi.begin(), kOpenMpi.end());
  absl::StatusOr<RankEnv> mpi_in_slurm = detect(all);
  ASSERT_TRUE(mpi_in_slurm.ok()) << mpi_in_slurm.status();
  EXPECT_EQ(mpi_in_slurm->source, RankEnvSource::kOpenMpi);
  EXPECT_EQ(mpi_in_slurm->rank, 5);

  all.insert(kTorchrun.begin(), kTorchrun.end());
  absl::StatusOr<RankEnv> launcher_in_mpi = detect(all);
  ASSERT_TRUE(launcher_in_mpi.ok()) << launcher_in_mpi.status();
  EXPECT_EQ(launcher_in_mpi->source, RankEnvSource::kTorchrun);
  EXPECT_EQ(launcher_in_mpi->rank, 3);
}

TEST(RankEnvTest, NoLauncherVariablesIsAnError) {
  EXPECT_THAT(detect({{"MASTER_ADDR", "x"}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("no launcher environment found"), HasSubstr("RANK"),
                             HasSubstr("OMPI_COMM_WORLD_RANK"), HasSubstr("SLURM_PROCID"))));
}

TEST(RankEnvTest, MissingVariablesAreNamed) {
  EXPECT_THAT(detect(without(kTorchrun, "WORLD_SIZE")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("torchrun launch"), HasSubstr("WORLD_SIZE is missing"))));
  EXPECT_THAT(detect(without(kTorchrun, "LOCAL_RANK")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("LOCAL_RANK is missing")));
  EXPECT_THAT(detect(without(kTorchrun, "MASTER_PORT")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MASTER_PORT is missing")));
  EXPECT_THAT(detect(without(kTorchrun, "MASTER_ADDR")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MASTER_ADDR is missing")));
  EXPECT_THAT(
      detect(without(kOpenMpi, "OMPI_COMM_WORLD_LOCAL_RANK")).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("openmpi launch"),
                     HasSubstr("OMPI_COMM_WORLD_LOCAL_RANK is missing"), HasSubstr("mpirun"))));
  EXPECT_THAT(detect(without(kSlurm, "SLURM_NTASKS")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("slurm launch"), HasSubstr("SLURM_NTASKS is missing"),
                             HasSubstr("srun"))));
}

TEST(RankEnvTest, MalformedNumbersAreNamedWithTheirValue) {
  for (const std::string bad : {"", "two", "3x", "1.5", " 1", "+1"}) {
    EXPECT_THAT(detect(with(kTorchrun, "RANK", bad)).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("RANK is '" + bad + "'; it must be a whole number")));
  }
  EXPECT_THAT(detect(with(kTorchrun, "WORLD_SIZE", "99999999999")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("WORLD_SIZE is '99999999999'; that is too "
                                 "large")));
  EXPECT_THAT(
      detect(with(kOpenMpi, "OMPI_COMM_WORLD_SIZE", "six")).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("OMPI_COMM_WORLD_SIZE is 'six'")));
}

TEST(RankEnvTest, OutOfRangeValuesAreRejected) {
  EXPECT_THAT(
      detect(with(kTorchrun, "RANK", "-1")).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RANK is -1; it must be at least 0")));
  EXPECT_THAT(detect(with(kTorchrun, "WORLD_SIZE", "0")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("WORLD_SIZE is 0; it must be at least 1")));
  EXPECT_THAT(detect(with(kTorchrun, "RANK", "8")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("RANK is 8 but WORLD_SIZE is 8; a rank must "
                                 "be in [0, 8)")));
  EXPECT_THAT(detect(with(kSlurm, "SLURM_LOCALID", "16")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("SLURM_LOCALID is 16 but SLURM_NTASKS is 16")));
}

TEST(RankEnvTest, BadMasterValuesAreRejected) {
  EXPECT_THAT(detect(with(kTorchrun, "MASTER_PORT", "http")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("MASTER_PORT is 'http'; it must be a whole "
                                 "number")));
  for (const std::string bad : {"0", "65536"}) {
    EXPECT_THAT(
        detect(with(kTorchrun, "MASTER_PORT", bad)).status(),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr("MASTER_PORT is"), HasSubstr("port number in [1, 65535]"))));
  }
  EXPECT_THAT(detect(with(kOpenMpi, "MASTER_ADDR", "")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MASTER_ADDR is empty")));
  RankEnvOptions options;
  options.default_master_port = 0;
  EXPECT_THAT(detect(kOpenMpi, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the default master port is 0; it must be "
                                 "a port number")));
}

TEST(RankEnvTest, SourceNames) {
  EXPECT_EQ(rankEnvSourceName(RankEnvSource::kTorchrun), "torchrun");
  EXPECT_EQ(rankEnvSourceName(RankEnvSource::kOpenMpi), "openmpi");
  EXPECT_EQ(rankEnvSourceName(RankEnvSource::kSlurm), "slurm");
}

}  // namespace
}  // namespace loom::launch
