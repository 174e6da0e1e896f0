// Registration of every backend of this build.
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

}  // namespace loom::comm
