//===- Ops.h - Numerical pieces of the reference model ----------*- C++ -*-===//
//
// Shared by the layer-wise model (Model.cpp) and the model cut at the
// attention boundary (HelixModel.cpp): GEMM through OpenBLAS, RMSNorm,
// GELU, causal multi-head attention, deterministic initialization. Row-major
// matrices throughout.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_OPS_H
#define STAGECRAFT_KERNELS_OPS_H

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace stagecraft::kernels::ops {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}


/// C (m x n) (+)= op(A) op(B) with A m x k, B k x n after the ops.
inline void gemm(bool transA, bool transB, int m, int n, int k, const float *a,
          const float *b, float *c, bool accumulate) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
              transA ? m : k, b, transB ? k : n, accumulate ? 1.0f : 0.0f, c, n);
}

inline void initUniform(std::vector<float> &w, uint64_t seed, float scale) {
  for (size_t i = 0; i < w.size(); ++i) {
    uint64_t h = mix(seed ^ mix(i));
    double u = (h >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
    w[i] = static_cast<float>((2.0 * u - 1.0) * scale);
  }
}

constexpr float kEps = 1e-5f;

/// y = x / rms(x) * g per row; keeps xhat and 1/rms.
inline void rmsForward(int rows, int cols, const float *x, const float *g, float *y,
                float *xhat, float *inv) {
  for (int r = 0; r < rows; ++r) {
    const float *xr = x + static_cast<size_t>(r) * cols;
    double ss = 0;
    for (int c = 0; c < cols; ++c)
      ss += static_cast<double>(xr[c]) * xr[c];
    float iv = 1.0f / std::sqrt(static_cast<float>(ss / cols) + kEps);
    inv[r] = iv;
    for (int c = 0; c < cols; ++c) {
      float xh = xr[c] * iv;
      xhat[static_cast<size_t>(r) * cols + c] = xh;
      y[static_cast<size_t>(r) * cols + c] = xh * g[c];
    }
  }
}

/// dx (+)= input gradient of RMSNorm given dy.
inline void rmsBackwardInput(int rows, int cols, const float *dy, const float *g,
                      const float *xhat, const float *inv, float *dx,
                      bool accumulate) {
  for (int r = 0; r < rows; ++r) {
    size_t o = static_cast<size_t>(r) * cols;
    double dot = 0;
    for (int c = 0; c < cols; ++c)
      dot += static_cast<double>(dy[o + c]) * g[c] * xhat[o + c];
    float mean = static_cast<float>(dot / cols);
    for (int c = 0; c < cols; ++c) {
      float v = inv[r] * (dy[o + c] * g[c] - xhat[o + c] * mean);
      dx[o + c] = accumulate ? dx[o + c] + v : v;
    }
  }
}

inline void rmsBackwardWeight(int rows, int cols, const float *dy, const float *xhat,
                       float *dg) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      dg[c] += dy[static_cast<size_t>(r) * cols + c] *
               xhat[static_cast<size_t>(r) * cols + c];
}

inline float gelu(float u) {
  const float k = 0.7978845608f;
  return 0.5f * u * (1.0f + std::tanh(k * (u + 0.044715f * u * u * u)));
}

inline float geluGrad(float u) {
  const float k = 0.7978845608f;
  float inner = k * (u + 0.044715f * u * u * u);
  float t = std::tanh(inner);
  return 0.5f * (1.0f + t) +
         0.5f * u * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * u * u);
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
        const float *q = &qkv[(static_cast<size_t>(b) * S + i) * 3 * H + h * dh];
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
        const float *q = &qkv[(static_cast<size_t>(b) * S + i) * 3 * H + h * dh];
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
