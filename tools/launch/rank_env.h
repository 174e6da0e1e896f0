// Lets a rank binary find its place in the job (rank, world size, local rank,
// master address) from whichever launcher started it: //tools:launch or
// torchrun, Open MPI's mpirun, or Slurm's srun.
#ifndef LOOM_TOOLS_LAUNCH_RANK_ENV_H_
#define LOOM_TOOLS_LAUNCH_RANK_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace loom::launch {

// The launcher whose environment variables a RankEnv was read from.
enum class RankEnvSource {
  kTorchrun,  // RANK, WORLD_SIZE, LOCAL_RANK: //tools:launch and torchrun
  kOpenMpi,   // OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK: mpirun
  kSlurm,     // SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID: srun
};

// "torchrun", "openmpi" or "slurm", for messages and logs.
absl::string_view rankEnvSourceName(RankEnvSource source);

struct RankEnv {
  RankEnvSource source = RankEnvSource::kTorchrun;
  int rank = 0;
  int world_size = 1;
  // The rank's index among the ranks on its machine; it picks the GPU.
  int local_rank = 0;
  // How many ranks run on this machine (LOCAL_WORLD_SIZE,
  // OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE; 1 when the launcher
  // does not say).
  int local_world_size = 1;
  // Where rank 0 serves the job's store.
  std::string master_addr;
  int master_port = 0;
};

struct RankEnvOptions {
  // mpirun and srun do not say where rank 0 runs. MASTER_ADDR/MASTER_PORT
  // win when the job exports them (mpirun -x MASTER_ADDR=...), then, under
  // Slurm, SLURM_LAUNCH_NODE_IPADDR; these defaults come last. They fit a
  // job on one machine; torchrun uses the same port.
  std::string default_master_addr = "127.0.0.1";
  int default_master_port = 29500;
  // Reads an environment variable; empty means the process environment.
  // Tests, and code that runs ranks as threads, pass their own.
  std::function<std::optional<std::string>(const std::string&)> getenv;
};

// Reads this process's rank from the environment. The launchers are tried in
// the order above, by the variable that names the rank (RANK, then
// OMPI_COMM_WORLD_RANK, then SLURM_PROCID): our launcher started inside a
// Slurm allocation, or mpirun inside one, must win over the allocation's
// own variables. Fails with an invalid-argument error that names the
// variable when none of the rank variables is set, when a launcher's other
// variables are missing or not numbers, or when the values disagree (a rank
// outside [0, world size)).
absl::StatusOr<RankEnv> detectRankEnv(const RankEnvOptions& options = {});

// An environment lookup for comm::rendezvous("env://"): the torchrun names
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) answered from
// `env`, whichever launcher it came from, everything else from the process
// environment. So one rank binary meets its peers under any launcher.
std::function<std::optional<std::string>(const std::string&)> rendezvousEnv(const RankEnv& env);

}  // namespace loom::launch

#endif  // LOOM_TOOLS_LAUNCH_RANK_ENV_H_
