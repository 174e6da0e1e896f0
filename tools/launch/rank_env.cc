// Reads the rank variables of torchrun-style launchers, Open MPI and Slurm,
// checking each value and their consistency so a misconfigured job fails at
// start-up with the variable named, not later in a rendezvous that hangs.
#include "tools/launch/rank_env.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/errors.h"

namespace loom::launch {
namespace {

using Lookup = std::function<std::optional<std::string>(const std::string&)>;

// The variables one launcher sets, and what to tell a user whose job has
// only some of them.
struct LauncherVars {
  RankEnvSource source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  // How many ranks share this machine; optional (1 when absent).
  const char* local_world_size;
  const char* how_to_fix;
};

constexpr LauncherVars kLaunchers[] = {
    {RankEnvSource::kTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
     "start the binary with //tools:launch or torchrun, or set RANK, "
     "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT yourself"},
    {RankEnvSource::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
     "start the binary with Open MPI's mpirun, which sets every "
     "OMPI_COMM_WORLD_* variable"},
    {RankEnvSource::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
     "SLURM_NTASKS_PER_NODE",
     "start the binary with srun, which sets SLURM_PROCID, SLURM_NTASKS and "
     "SLURM_LOCALID"},
};

// A launcher variable that must be present.
absl::StatusOr<std::string> require(const Lookup& getenv, const LauncherVars& launcher,
                                    const char* name) {
  std::optional<std::string> value = getenv(name);
  if (!value.has_value()) {
    return comm::invalidArgumentError(
        absl::StrFormat("%s is set, so this is a %s launch, but %s is missing; %s", launcher.rank,
                        rankEnvSourceName(launcher.source), name, launcher.how_to_fix));
  }
  return *value;
}

// `value` of variable `name` as a whole number no smaller than `minimum`.
absl::StatusOr<int> parseNumber(const char* name, const std::string& value, int minimum) {
  int number = 0;
  const char* end = value.data() + value.size();
  const std::from_chars_result parsed = std::from_chars(value.data(), end, number);
  if (parsed.ec == std::errc::result_out_of_range) {
    return comm::invalidArgumentError(
        absl::StrFormat("%s is '%s'; that is too large", name, value));
  }
  if (value.empty() || parsed.ec != std::errc() || parsed.ptr != end) {
    return comm::invalidArgumentError(
        absl::StrFormat("%s is '%s'; it must be a whole number", name, value));
  }
  if (number < minimum) {
    return comm::invalidArgumentError(
        absl::StrFormat("%s is %d; it must be at least %d", name, number, minimum));
  }
  return number;
}

absl::StatusOr<int> requireNumber(const Lookup& getenv, const LauncherVars& launcher,
                                  const char* name, int minimum) {
  absl::StatusOr<std::string> value = require(getenv, launcher, name);
  if (!value.ok()) return value.status();
  return parseNumber(name, *value, minimum);
}

absl::StatusOr<int> parsePort(const char* name, const std::string& value) {
  absl::StatusOr<int> port = parseNumber(name, value, 0);
  if (port.ok() && (*port < 1 || *port > 65535)) {
    return comm::invalidArgumentError(
        absl::StrFormat("%s is %d; it must be a port number in [1, 65535]", name, *port));
  }
  return port;
}

// Fills the master address and port. A torchrun-style launch must name
// them; mpirun and srun do not, so exported values, Slurm's launch node and
// the defaults are tried in turn.
absl::Status readMaster(const Lookup& getenv, const LauncherVars& launcher,
                        const RankEnvOptions& options, RankEnv& env) {
  std::optional<std::string> addr = getenv("MASTER_ADDR");
  std::optional<std::string> port = getenv("MASTER_PORT");
  if (launcher.source == RankEnvSource::kTorchrun) {
    for (const char* name : {"MASTER_ADDR", "MASTER_PORT"}) {
      absl::StatusOr<std::string> value = require(getenv, launcher, name);
      if (!value.ok()) return value.status();
    }
  }
  if (addr.has_value() && addr->empty()) {
    return comm::invalidArgumentError(
        "MASTER_ADDR is empty; set it to the host name or address of the "
        "machine that runs rank 0");
  }
  if (!addr.has_value() && launcher.source == RankEnvSource::kSlurm) {
    addr = getenv("SLURM_LAUNCH_NODE_IPADDR");
  }
  env.master_addr = addr.value_or(options.default_master_addr);
  absl::StatusOr<int> number =
      port.has_value()
          ? parsePort("MASTER_PORT", *port)
          : parsePort("the default master port", std::to_string(options.default_master_port));
  if (!number.ok()) return number.status();
  env.master_port = *number;
  return absl::OkStatus();
}

absl::StatusOr<RankEnv> readLauncher(const Lookup& getenv, const LauncherVars& launcher,
                                     const RankEnvOptions& options) {
  RankEnv env;
  env.source = launcher.source;
  absl::StatusOr<int> rank = requireNumber(getenv, launcher, launcher.rank, 0);
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int> world_size = requireNumber(getenv, launcher, launcher.world_size, 1);
  if (!world_size.ok()) return world_size.status();
  absl::StatusOr<int> local_rank = requireNumber(getenv, launcher, launcher.local_rank, 0);
  if (!local_rank.ok()) return local_rank.status();
  if (*rank >= *world_size) {
    return comm::invalidArgumentError(
        absl::StrFormat("%s is %d but %s is %d; a rank must be in [0, %d)", launcher.rank, *rank,
                        launcher.world_size, *world_size, *world_size));
  }
  if (*local_rank >= *world_size) {
    return comm::invalidArgumentError(
        absl::StrFormat("%s is %d but %s is %d; a local rank must be below the world size",
                        launcher.local_rank, *local_rank, launcher.world_size, *world_size));
  }
  env.rank = *rank;
  env.world_size = *world_size;
  env.local_rank = *local_rank;
  if (std::optional<std::string> local = getenv(launcher.local_world_size)) {
    absl::StatusOr<int> count = parseNumber(launcher.local_world_size, *local, 1);
    if (!count.ok()) return count.status();
    if (*count <= *local_rank || *count > *world_size) {
      return comm::invalidArgumentError(absl::StrFormat(
          "%s is %d, but %s is %d and %s is %d; it must be above the local rank and at most "
          "the world size",
          launcher.local_world_size, *count, launcher.local_rank, *local_rank, launcher.world_size,
          *world_size));
    }
    env.local_world_size = *count;
  }
  if (absl::Status status = readMaster(getenv, launcher, options, env); !status.ok()) {
    return status;
  }
  return env;
}

}  // namespace

absl::string_view rankEnvSourceName(RankEnvSource source) {
  switch (source) {
    case RankEnvSource::kTorchrun:
      return "torchrun";
    case RankEnvSource::kOpenMpi:
      return "openmpi";
    case RankEnvSource::kSlurm:
      return "slurm";
  }
  return "unknown";
}

absl::StatusOr<RankEnv> detectRankEnv(const RankEnvOptions& options) {
  const Lookup getenv =
      options.getenv ? options.getenv : [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  for (const LauncherVars& launcher : kLaunchers) {
    if (getenv(launcher.rank).has_value()) {
      return readLauncher(getenv, launcher, options);
    }
  }
  return comm::invalidArgumentError(
      "no launcher environment found: none of RANK, OMPI_COMM_WORLD_RANK or "
      "SLURM_PROCID is set; start the binary with //tools:launch (or "
      "torchrun), mpirun or srun, or set RANK, WORLD_SIZE, LOCAL_RANK, "
      "MASTER_ADDR and MASTER_PORT");
}

std::function<std::optional<std::string>(const std::string&)> rendezvousEnv(const RankEnv& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    if (name == "RANK") return absl::StrCat(env.rank);
    if (name == "WORLD_SIZE") return absl::StrCat(env.world_size);
    if (name == "LOCAL_RANK") return absl::StrCat(env.local_rank);
    if (name == "MASTER_ADDR") return env.master_addr;
    if (name == "MASTER_PORT") return absl::StrCat(env.master_port);
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

}  // namespace loom::launch
