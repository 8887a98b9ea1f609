//===- Spin.cu - The timed kernel on a GPU --------------------------------===//
//
// One thread that spins on the SM clock for a given number of cycles: the
// GPU counterpart of the CPU executor's timed kernel. It occupies one SM, so
// ranks sharing a GPU run their computes side by side.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Spin.h"

namespace {
__global__ void spinKernel(long long cycles) {
  long long begin = clock64();
  while (clock64() - begin < cycles) {
  }
}
} // namespace

cudaError_t stagecraft::runtime::cuda::launchSpin(long long cycles,
                                                  cudaStream_t stream) {
  spinKernel<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}
