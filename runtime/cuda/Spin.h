//===- Spin.h - The timed kernel on a GPU -----------------------*- C++ -*-===//
//
// Kept free of LLVM headers: only this and Spin.cu go through nvcc.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_CUDA_SPIN_H
#define STAGECRAFT_RUNTIME_CUDA_SPIN_H

#include <cuda_runtime_api.h>

namespace stagecraft::runtime::cuda {

/// Enqueues a kernel on \p stream that spins for \p cycles SM clock cycles.
cudaError_t launchSpin(long long cycles, cudaStream_t stream);

} // namespace stagecraft::runtime::cuda

#endif // STAGECRAFT_RUNTIME_CUDA_SPIN_H
