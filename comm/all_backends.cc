// Registration of every backend of this build, at static initialisation:
// linking //comm:all_backends (alwayslink) is what makes the names known.
#include "comm/all_backends.h"

#include "comm/gloo/gloo_backend.h"
#include "comm/mpi/mpi_backend.h"
#include "comm/nccl/nccl_backend.h"

namespace loom::comm {

void registerAllBackends() {
  gloo::registerGlooBackend();
  mpi::registerMpiBackend();
  nccl::registerNcclBackend();
}

namespace {

[[maybe_unused]] const bool kRegisteredAtLink = (registerAllBackends(), true);

}  // namespace

}  // namespace loom::comm
