//===- CudaStage.h - The device model on a CUDA device ----------*- C++ -*-===//
//
// Layer-wise stages of the reference model on a CUDA device: the device
// model of DeviceStage.h with cuBLAS for its GEMMs (fp32, no TF32) and the
// bodies of Bodies.h as kernels, one thread per index, all issued on one
// stream. Built when the cuda backend is.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_CUDA_CUDASTAGE_H
#define STAGECRAFT_KERNELS_CUDA_CUDASTAGE_H

#include "kernels/Model.h"

namespace stagecraft::kernels::cuda {

/// Stages on \p device that issue their work on \p stream (a cudaStream_t
/// of that device); the caller keeps the stream alive and current device
/// set in the threads that use the stages. Waits for the device (losses,
/// parameter downloads) poll \p stop, when given, and give up with an
/// error once it returns true (another rank failed: work queued behind its
/// transfers would never finish).
StageFactory cudaStages(int device, void *stream,
                        std::function<bool()> stop = {});

} // namespace stagecraft::kernels::cuda

#endif // STAGECRAFT_KERNELS_CUDA_CUDASTAGE_H
