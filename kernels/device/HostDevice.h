//===- HostDevice.h - The device model's device on the host -----*- C++ -*-===//
//
// A device for DeviceStage.h in host memory: bodies run as loops, GEMMs go
// to OpenBLAS with the column-major arguments cuBLAS gets. It checks what a
// GPU would not report: every GEMM operand and copy must lie inside a live
// allocation (no overrun, no use after release), leading dimensions must be
// what cuBLAS accepts, and fresh allocations are filled with NaN so that a
// read of memory nobody wrote shows in the results. Unit tests run the
// device model on it against the reference, and `stagecraft-run --train
// --model=device` runs it in real schedules (hostDeviceStages()).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_DEVICE_HOSTDEVICE_H
#define STAGECRAFT_KERNELS_DEVICE_HOSTDEVICE_H

#include "kernels/Model.h"

#include <cblas.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>

namespace stagecraft::kernels::device {

class HostDevice {
public:
  /// \p trustForeign: pointers outside this device's allocations (messages
  /// the caller owns, as a runtime's slots) are accepted without a check.
  explicit HostDevice(bool trustForeign = false) : trustForeign(trustForeign) {}
  ~HostDevice() {
    for (auto &[start, bytes] : live)
      std::free(reinterpret_cast<void *>(start));
  }

  void *allocate(size_t bytes) {
    size_t n = std::max<size_t>(bytes, 4);
    float *p = static_cast<float *>(std::malloc(n));
    for (size_t i = 0; i < n / 4; ++i)
      p[i] = std::numeric_limits<float>::quiet_NaN();
    live[reinterpret_cast<uintptr_t>(p)] = bytes;
    ++allocations;
    return p;
  }
  void release(void *p, size_t bytes) {
    auto it = live.find(reinterpret_cast<uintptr_t>(p));
    if (it == live.end() || it->second != bytes) {
      fail(fmt::format("release of {} bytes at {} that are not allocated",
                       bytes, p));
      return;
    }
    live.erase(it);
    std::free(p);
  }
  /// Lets the caller's own buffers (a test's messages) be operands.
  void adopt(const void *p, size_t bytes) {
    adopted[reinterpret_cast<uintptr_t>(p)] = bytes;
  }

  void upload(void *dst, const void *src, size_t bytes) {
    if (inside(dst, bytes, "upload destination"))
      std::memcpy(dst, src, bytes);
  }
  void download(void *dst, const void *src, size_t bytes) {
    if (inside(src, bytes, "download source"))
      std::memcpy(dst, src, bytes);
  }
  void copy(void *dst, const void *src, size_t bytes) {
    if (inside(dst, bytes, "copy destination") &&
        inside(src, bytes, "copy source"))
      std::memmove(dst, src, bytes);
  }
  void zero(void *dst, size_t bytes) {
    if (inside(dst, bytes, "zero"))
      std::memset(dst, 0, bytes);
  }
  template <class Body> void forEach(int n, const Body &body) {
    if (!failure.empty())
      return;
    for (int i = 0; i < n; ++i)
      body(i);
  }

  void gemm(bool transA, bool transB, int m, int n, int k, const float *a,
            int lda, long long strideA, const float *b, int ldb,
            long long strideB, float beta, float *c, int ldc, long long strideC,
            int batch) {
    if (!failure.empty())
      return;
    // cuBLAS's argument rules for a column-major C = op(A) op(B).
    int rowsA = transA ? k : m, colsA = transA ? m : k;
    int rowsB = transB ? n : k, colsB = transB ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch < 1 || lda < std::max(1, rowsA) ||
        ldb < std::max(1, rowsB) || ldc < std::max(1, m)) {
      fail(fmt::format("gemm: invalid arguments m {} n {} k {} lda {} ldb {} "
                       "ldc {} batch {}",
                       m, n, k, lda, ldb, ldc, batch));
      return;
    }
    auto extent = [](int rows, int cols, int ld, long long stride, int count) {
      if (rows == 0 || cols == 0)
        return size_t(0);
      return 4 * (static_cast<size_t>(cols - 1) * ld + rows +
                  static_cast<size_t>(stride) * (count - 1));
    };
    if (!inside(a, extent(rowsA, colsA, lda, strideA, batch), "gemm A") ||
        !inside(b, extent(rowsB, colsB, ldb, strideB, batch), "gemm B") ||
        !inside(c, extent(m, n, ldc, strideC, batch), "gemm C"))
      return;
    ++gemms;
    for (int i = 0; i < batch; ++i)
      cblas_sgemm(CblasColMajor, transA ? CblasTrans : CblasNoTrans,
                  transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                  a + i * strideA, lda, b + i * strideB, ldb, beta,
                  c + i * strideC, ldc);
  }

  std::string error() const { return failure; }

  /// Live allocations and counts, for tests.
  size_t liveAllocations() const { return live.size(); }
  size_t allocations = 0, gemms = 0;

private:
  void fail(std::string what) {
    if (failure.empty())
      failure = "host device: " + what;
  }
  bool within(const std::map<uintptr_t, size_t> &blocks, uintptr_t p,
              size_t bytes) const {
    auto it = blocks.upper_bound(p);
    if (it == blocks.begin())
      return false;
    --it;
    return p >= it->first && p + bytes <= it->first + it->second;
  }
  /// Whether [p, p + bytes) touches a live allocation (then it must lie
  /// inside it).
  bool overlapsLive(uintptr_t p, size_t bytes) const {
    auto it = live.lower_bound(p + bytes);
    if (it == live.begin())
      return false;
    --it;
    return it->first + it->second > p;
  }
  bool inside(const void *ptr, size_t bytes, const char *what) {
    if (!failure.empty())
      return false;
    if (bytes == 0)
      return true;
    uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    if (within(live, p, bytes) || within(adopted, p, bytes))
      return true;
    if (trustForeign && !overlapsLive(p, bytes))
      return true;
    fail(fmt::format("{}: {} bytes at {} outside every live allocation", what,
                     bytes, ptr));
    return false;
  }

  bool trustForeign;
  std::map<uintptr_t, size_t> live, adopted;
  std::string failure;
};

/// Layer-wise stages of the device model on the host device (messages in
/// the caller's memory), named "host device".
StageFactory hostDeviceStages();

} // namespace stagecraft::kernels::device

#endif // STAGECRAFT_KERNELS_DEVICE_HOSTDEVICE_H
