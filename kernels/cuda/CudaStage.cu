//===- CudaStage.cu - The device model on a CUDA device -------------------===//
//
// See CudaStage.h. The device: a caching allocator over cudaMalloc (stashes
// come and go every microbatch; cudaFree would synchronize the device), the
// bodies as one-thread-per-index kernels, GEMMs through cuBLAS on the
// stage's stream in pure fp32 (CUBLAS_PEDANTIC_MATH: no TF32, so results
// stay within fp32 rounding of the reference). The first failure is kept,
// later work is skipped, and status() reports it naming the call.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudaStage.h"
#include "kernels/device/DeviceStage.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <map>
#include <thread>
#include <vector>

using namespace stagecraft::kernels;

namespace {

template <class Body> __global__ void eachIndex(int n, Body body) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    body(i);
}

class CudaDevice {
public:
  CudaDevice(int device, cudaStream_t stream, std::function<bool()> stop)
      : device(device), stream(stream), stop(std::move(stop)) {
    check(cudaSetDevice(device), "cudaSetDevice");
    if (!failure.empty())
      return;
    if (cublasStatus_t st = cublasCreate(&handle);
        st != CUBLAS_STATUS_SUCCESS) {
      fail(fmt::format("cublasCreate: {}", cublasGetStatusString(st)));
      handle = nullptr;
      return;
    }
    checkBlas(cublasSetStream(handle, stream), "cublasSetStream");
    checkBlas(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH),
              "cublasSetMathMode");
  }
  ~CudaDevice() {
    cudaSetDevice(device);
    cudaStreamSynchronize(stream);
    for (auto &[bytes, blocks] : pool)
      for (void *p : blocks)
        cudaFree(p);
    if (handle)
      cublasDestroy(handle);
  }

  void *allocate(size_t bytes) {
    size_t size = round(bytes);
    std::vector<void *> &free = pool[size];
    if (!free.empty()) {
      void *p = free.back();
      free.pop_back();
      return p;
    }
    void *p = nullptr;
    if (!failure.empty())
      return nullptr;
    if (cudaError_t err = cudaMalloc(&p, size); err != cudaSuccess) {
      fail(fmt::format("cudaMalloc({} bytes): {}", size,
                       cudaGetErrorString(err)));
      return nullptr;
    }
    return p;
  }
  void release(void *p, size_t bytes) {
    if (p)
      pool[round(bytes)].push_back(p);
  }
  void upload(void *dst, const void *src, size_t bytes) {
    if (!ready(dst))
      return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (upload)");
    // The source may go away once this returns.
    if (failure.empty())
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  void download(void *dst, const void *src, size_t bytes) {
    // A copy to pageable memory blocks until the stream reaches it: reach
    // that point first, stoppably.
    if (!ready(src) || !drain())
      return;
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync (download)");
    if (failure.empty())
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  void copy(void *dst, const void *src, size_t bytes) {
    if (ready(dst) && ready(src))
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync");
  }
  void zero(void *dst, size_t bytes) {
    if (ready(dst))
      check(cudaMemsetAsync(dst, 0, bytes, stream), "cudaMemsetAsync");
  }
  template <class Body> void forEach(int n, const Body &body) {
    if (!failure.empty() || n <= 0)
      return;
    const int threads = 128;
    eachIndex<<<(n + threads - 1) / threads, threads, 0, stream>>>(n, body);
    check(cudaGetLastError(), "kernel launch");
  }
  void gemm(bool transA, bool transB, int m, int n, int k, const float *a,
            int lda, long long strideA, const float *b, int ldb,
            long long strideB, float beta, float *c, int ldc, long long strideC,
            int batch) {
    if (!failure.empty() || !handle || !a || !b || !c)
      return;
    const float one = 1.0f;
    cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch == 1)
      checkBlas(cublasSgemm(handle, opA, opB, m, n, k, &one, a, lda, b, ldb,
                            &beta, c, ldc),
                "cublasSgemm");
    else
      checkBlas(cublasSgemmStridedBatched(handle, opA, opB, m, n, k, &one, a,
                                          lda, strideA, b, ldb, strideB, &beta,
                                          c, ldc, strideC, batch),
                "cublasSgemmStridedBatched");
  }

  std::string error() {
    // A fault in a kernel already queued shows up here.
    if (failure.empty())
      check(cudaPeekAtLastError(), "device");
    return failure;
  }

private:
  /// Waits until the stream has done everything queued so far; false if it
  /// failed or \p stop asked to give up.
  bool drain() {
    if (!stop) {
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      return failure.empty();
    }
    cudaEvent_t reached;
    check(cudaEventCreateWithFlags(&reached, cudaEventDisableTiming),
          "cudaEventCreate");
    if (!failure.empty())
      return false;
    check(cudaEventRecord(reached, stream), "cudaEventRecord");
    while (failure.empty()) {
      cudaError_t q = cudaEventQuery(reached);
      if (q == cudaSuccess)
        break;
      if (q != cudaErrorNotReady) {
        check(q, "cudaEventQuery");
        break;
      }
      if (stop()) {
        fail("stopped waiting for the device: another rank failed");
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    cudaEventDestroy(reached);
    return failure.empty();
  }
  static size_t round(size_t bytes) {
    return std::max<size_t>(256, (bytes + 255) / 256 * 256);
  }
  bool ready(const void *p) { return failure.empty() && p; }
  void fail(std::string what) {
    if (failure.empty())
      failure = fmt::format("cuda device {}: {}", device, what);
  }
  void check(cudaError_t err, const char *what) {
    if (err != cudaSuccess)
      fail(fmt::format("{}: {}", what, cudaGetErrorString(err)));
  }
  void checkBlas(cublasStatus_t st, const char *what) {
    if (st != CUBLAS_STATUS_SUCCESS)
      fail(fmt::format("{}: {}", what, cublasGetStatusString(st)));
  }

  int device;
  cudaStream_t stream;
  std::function<bool()> stop;
  cublasHandle_t handle = nullptr;
  std::map<size_t, std::vector<void *>> pool;
  std::string failure;
};

} // namespace

StageFactory stagecraft::kernels::cuda::cudaStages(int gpu, void *stream,
                                                   std::function<bool()> stop) {
  auto s = static_cast<cudaStream_t>(stream);
  StageFactory f;
  f.make = [gpu, s, stop](
               const ModelConfig &c, int index, int numStages, int firstLayer,
               int layers) -> llvm::Expected<std::unique_ptr<LayerStage>> {
    auto stage = std::make_unique<device::DeviceStage<CudaDevice>>(
        std::make_unique<CudaDevice>(gpu, s, stop), c, index, numStages,
        firstLayer, layers);
    if (llvm::Error err = stage->status())
      return std::move(err);
    return stage;
  };
  f.allocate = [gpu](size_t bytes) -> float * {
    void *p = nullptr;
    cudaSetDevice(gpu);
    if (cudaMalloc(&p, std::max<size_t>(bytes, 4)) != cudaSuccess)
      return nullptr;
    cudaMemset(p, 0, std::max<size_t>(bytes, 4));
    return static_cast<float *>(p);
  };
  f.release = [](float *p) { cudaFree(p); };
  f.synchronize = [s] { cudaStreamSynchronize(s); };
  f.where = fmt::format("cuda device {}", gpu);
  return f;
}
