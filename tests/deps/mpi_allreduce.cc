// Rank program for the Open MPI wiring test: every rank all-reduces a vector
// and checks the sum; exits non-zero (on every rank) if any rank saw a wrong
// value, so mpirun's exit status is the test verdict.
#include <cstdio>
#include <vector>

#include "mpi.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  constexpr int kCount = 4096;
  std::vector<double> send(kCount), recv(kCount);
  for (int i = 0; i < kCount; ++i) send[i] = rank + 1.0 + i;
  MPI_Allreduce(send.data(), recv.data(), kCount, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

  // sum over ranks r of (r + 1 + i) = n(n+1)/2 + n*i
  const double n = world_size;
  int local_errors = 0;
  for (int i = 0; i < kCount; ++i) {
    if (recv[i] != n * (n + 1) / 2 + n * i) ++local_errors;
  }
  int errors = 0;
  MPI_Allreduce(&local_errors, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("mpi wiring: world size %d, %d wrong elements\n", world_size, errors);
  }
  MPI_Finalize();
  return errors == 0 && world_size > 1 ? 0 : 1;
}
