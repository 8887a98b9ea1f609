//===- Ops.h - Numerical pieces of the reference model ----------*- C++ -*-===//
//
// Shared by the layer-wise model (Model.cpp) and the model cut at the
// attention boundary (HelixModel.cpp): GEMM through OpenBLAS, RMSNorm,
// GELU, causal multi-head attention, deterministic initialization.
// Row-major matrices throughout. RMSNorm and GELU are the device model's
// bodies (device/Bodies.h) run as loops, so both compute them alike.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_OPS_H
#define STAGECRAFT_KERNELS_OPS_H

#include "kernels/device/Bodies.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace stagecraft::kernels::ops {

using device::mix;

/// C (m x n) (+)= op(A) op(B) with A m x k, B k x n after the ops.
inline void gemm(bool transA, bool transB, int m, int n, int k, const float *a,
                 const float *b, float *c, bool accumulate) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
              transA ? m : k, b, transB ? k : n, accumulate ? 1.0f : 0.0f, c,
              n);
}

inline void initUniform(std::vector<float> &w, uint64_t seed, float scale) {
  for (size_t i = 0; i < w.size(); ++i) {
    uint64_t h = mix(seed ^ mix(i));
    double u = (h >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
    w[i] = static_cast<float>((2.0 * u - 1.0) * scale);
  }
}

using device::gelu;
using device::geluGrad;
using device::kEps;

/// y = x / rms(x) * g per row; keeps xhat and 1/rms.
inline void rmsForward(int rows, int cols, const float *x, const float *g,
                       float *y, float *xhat, float *inv) {
  device::RmsForward body{cols, x, g, y, xhat, inv};
  for (int r = 0; r < rows; ++r)
    body(r);
}

/// dx (+)= input gradient of RMSNorm given dy.
inline void rmsBackwardInput(int rows, int cols, const float *dy,
                             const float *g, const float *xhat,
                             const float *inv, float *dx, bool accumulate) {
  device::RmsBackwardInput body{cols, dy, g, xhat, inv, dx, accumulate};
  for (int r = 0; r < rows; ++r)
    body(r);
}

inline void rmsBackwardWeight(int rows, int cols, const float *dy,
                              const float *xhat, float *dg) {
  device::RmsBackwardWeight body{rows, cols, dy, xhat, dg};
  for (int c = 0; c < cols; ++c)
    body(c);
}

/// Causal attention of \p qkv (tokens x 3H: Q, K, V per row) into \p out
/// (tokens x H, zeroed here), keeping the softmax in \p probs.
inline void attentionForward(int batch, int seq, int hidden, int heads,
                             const float *qkv, float *out,
                             std::vector<float> &probs) {
  const int H = hidden, S = seq, dh = H / heads;
  probs.assign(static_cast<size_t>(batch) * heads * S * S, 0.0f);
  std::fill(out, out + static_cast<size_t>(batch) * S * H, 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      float *P = probs.data() + (static_cast<size_t>(b) * heads + h) * S * S;
      for (int i = 0; i < S; ++i) {
        const float *q =
            &qkv[(static_cast<size_t>(b) * S + i) * 3 * H + h * dh];
        float mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const float *k =
              &qkv[(static_cast<size_t>(b) * S + j) * 3 * H + H + h * dh];
          float dot = 0;
          for (int d = 0; d < dh; ++d)
            dot += q[d] * k[d];
          P[i * S + j] = dot * scale;
          mx = std::max(mx, P[i * S + j]);
        }
        float sum = 0;
        for (int j = 0; j <= i; ++j)
          sum += P[i * S + j] = std::exp(P[i * S + j] - mx);
        for (int j = 0; j <= i; ++j)
          P[i * S + j] /= sum;
        float *o = &out[(static_cast<size_t>(b) * S + i) * H + h * dh];
        for (int j = 0; j <= i; ++j) {
          const float *v =
              &qkv[(static_cast<size_t>(b) * S + j) * 3 * H + 2 * H + h * dh];
          for (int d = 0; d < dh; ++d)
            o[d] += P[i * S + j] * v[d];
        }
      }
    }
}

/// The gradient of attentionForward: \p dout (tokens x H) to \p dqkv
/// (tokens x 3H, zeroed here).
inline void attentionBackward(int batch, int seq, int hidden, int heads,
                              const float *qkv, const std::vector<float> &probs,
                              const float *dout, float *dqkv) {
  const int H = hidden, S = seq, dh = H / heads;
  std::fill(dqkv, dqkv + static_cast<size_t>(batch) * S * 3 * H, 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  std::vector<float> dP(S);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const float *P =
          probs.data() + (static_cast<size_t>(b) * heads + h) * S * S;
      for (int i = 0; i < S; ++i) {
        const float *dO = &dout[(static_cast<size_t>(b) * S + i) * H + h * dh];
        float rowDot = 0;
        for (int j = 0; j <= i; ++j) {
          const float *v =
              &qkv[(static_cast<size_t>(b) * S + j) * 3 * H + 2 * H + h * dh];
          float *dv =
              &dqkv[(static_cast<size_t>(b) * S + j) * 3 * H + 2 * H + h * dh];
          float dot = 0;
          for (int d = 0; d < dh; ++d) {
            dot += dO[d] * v[d];
            dv[d] += P[i * S + j] * dO[d];
          }
          dP[j] = dot;
          rowDot += dot * P[i * S + j];
        }
        const float *q =
            &qkv[(static_cast<size_t>(b) * S + i) * 3 * H + h * dh];
        float *dq = &dqkv[(static_cast<size_t>(b) * S + i) * 3 * H + h * dh];
        for (int j = 0; j <= i; ++j) {
          float dS = P[i * S + j] * (dP[j] - rowDot) * scale;
          const float *k =
              &qkv[(static_cast<size_t>(b) * S + j) * 3 * H + H + h * dh];
          float *dk =
              &dqkv[(static_cast<size_t>(b) * S + j) * 3 * H + H + h * dh];
          for (int d = 0; d < dh; ++d) {
            dq[d] += dS * k[d];
            dk[d] += dS * q[d];
          }
        }
      }
    }
}

} // namespace stagecraft::kernels::ops

#endif // STAGECRAFT_KERNELS_OPS_H
