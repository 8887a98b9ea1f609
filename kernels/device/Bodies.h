//===- Bodies.h - Per-thread bodies of the device model ---------*- C++ -*-===//
//
// The element- and row-wise parts of the device model (DeviceStage.h) as
// function objects over one index, compiled both by the host compiler and
// by nvcc: a CUDA device runs a body as one thread per index, the host
// device as a loop. Each body does what the reference model (Ops.h,
// Model.cpp) does for that index, in the same order of operations, so the
// host device computes the reference's numbers bit for bit except for GEMM
// summation order.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_DEVICE_BODIES_H
#define STAGECRAFT_KERNELS_DEVICE_BODIES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define SC_HD __host__ __device__
#else
#define SC_HD
#endif

namespace stagecraft::kernels::device {

SC_HD inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The synthetic token of position \p t of microbatch \p mb in \p step.
SC_HD inline int syntheticToken(uint64_t seed, int vocab, int step, int mb,
                                int t) {
  uint64_t h = mix(seed ^ mix(step * 1000003ULL + mb * 7919ULL + t));
  return static_cast<int>(h % static_cast<uint64_t>(vocab));
}

/// Its target: a fixed map of the token, learnable, so the loss goes down.
SC_HD inline int syntheticTarget(uint64_t seed, int vocab, int step, int mb,
                                 int t) {
  return (syntheticToken(seed, vocab, step, mb, t) * 7 + 3) % vocab;
}

constexpr float kEps = 1e-5f;

SC_HD inline float gelu(float u) {
  const float k = 0.7978845608f;
  return 0.5f * u * (1.0f + tanhf(k * (u + 0.044715f * u * u * u)));
}

SC_HD inline float geluGrad(float u) {
  const float k = 0.7978845608f;
  float inner = k * (u + 0.044715f * u * u * u);
  float t = tanhf(inner);
  return 0.5f * (1.0f + t) +
         0.5f * u * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * u * u);
}

/// Which tokens a microbatch holds.
struct Tokens {
  uint64_t seed;
  int vocab, step, mb, sequence;
  SC_HD int token(int t) const {
    return syntheticToken(seed, vocab, step, mb, t);
  }
  SC_HD int target(int t) const {
    return syntheticTarget(seed, vocab, step, mb, t);
  }
};

/// Index: element (t, h). x = embedding[token] + position[t mod sequence].
struct EmbedForward {
  Tokens tokens;
  int hidden;
  const float *embedding, *position;
  float *x;
  SC_HD void operator()(int i) const {
    int t = i / hidden, h = i % hidden;
    int tok = tokens.token(t), pos = t % tokens.sequence;
    x[i] = embedding[static_cast<size_t>(tok) * hidden + h] +
           position[static_cast<size_t>(pos) * hidden + h];
  }
};

/// Index: column h. Accumulates the embedding and position gradients over
/// the tokens in order (one thread owns a column: no races, no atomics).
struct EmbedBackwardWeight {
  Tokens tokens;
  int hidden, count;
  const float *dx;
  float *dEmbedding, *dPosition;
  SC_HD void operator()(int h) const {
    for (int t = 0; t < count; ++t) {
      float g = dx[static_cast<size_t>(t) * hidden + h];
      int tok = tokens.token(t), pos = t % tokens.sequence;
      dEmbedding[static_cast<size_t>(tok) * hidden + h] += g;
      dPosition[static_cast<size_t>(pos) * hidden + h] += g;
    }
  }
};

/// Index: row. y = x / rms(x) * g; keeps xhat and 1 / rms.
struct RmsForward {
  int cols;
  const float *x, *g;
  float *y, *xhat, *inv;
  SC_HD void operator()(int r) const {
    const float *xr = x + static_cast<size_t>(r) * cols;
    double ss = 0;
    for (int c = 0; c < cols; ++c)
      ss += static_cast<double>(xr[c]) * xr[c];
    float iv = 1.0f / sqrtf(static_cast<float>(ss / cols) + kEps);
    inv[r] = iv;
    for (int c = 0; c < cols; ++c) {
      float xh = xr[c] * iv;
      xhat[static_cast<size_t>(r) * cols + c] = xh;
      y[static_cast<size_t>(r) * cols + c] = xh * g[c];
    }
  }
};

/// Index: row. dx (+)= the input gradient of RMSNorm given dy.
struct RmsBackwardInput {
  int cols;
  const float *dy, *g, *xhat, *inv;
  float *dx;
  bool accumulate;
  SC_HD void operator()(int r) const {
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
};

/// Index: column. dg += sum over rows of dy * xhat, rows in order.
struct RmsBackwardWeight {
  int rows, cols;
  const float *dy, *xhat;
  float *dg;
  SC_HD void operator()(int c) const {
    float acc = dg[c];
    for (int r = 0; r < rows; ++r)
      acc += dy[static_cast<size_t>(r) * cols + c] *
             xhat[static_cast<size_t>(r) * cols + c];
    dg[c] = acc;
  }
};

struct GeluForward {
  const float *u;
  float *act;
  SC_HD void operator()(int i) const { act[i] = gelu(u[i]); }
};

struct GeluBackward {
  const float *dact, *u;
  float *du;
  SC_HD void operator()(int i) const { du[i] = dact[i] * geluGrad(u[i]); }
};

/// Index: a row (query i of one sequence and head) of the scores Q K^T.
/// Scales, masks the future (j > i) to zero, and turns the rest into the
/// softmax, in place.
struct CausalSoftmax {
  int sequence;
  float scale;
  float *scores;
  SC_HD void operator()(int r) const {
    const int S = sequence, i = r % S;
    float *P = scores + static_cast<size_t>(r) * S;
    float mx = -INFINITY;
    for (int j = 0; j <= i; ++j) {
      P[j] = P[j] * scale;
      mx = P[j] > mx ? P[j] : mx;
    }
    float sum = 0;
    for (int j = 0; j <= i; ++j)
      sum += P[j] = expf(P[j] - mx);
    for (int j = 0; j <= i; ++j)
      P[j] /= sum;
    for (int j = i + 1; j < S; ++j)
      P[j] = 0.0f;
  }
};

/// Index: a row of dP = dO V^T; turns it into the gradient of the scores
/// before scaling (dS = P (dP - rowsum(dP P)) scale), in place.
struct CausalSoftmaxBackward {
  int sequence;
  float scale;
  const float *probs;
  float *grad;
  SC_HD void operator()(int r) const {
    const int S = sequence, i = r % S;
    const float *P = probs + static_cast<size_t>(r) * S;
    float *dP = grad + static_cast<size_t>(r) * S;
    float rowDot = 0;
    for (int j = 0; j <= i; ++j)
      rowDot += dP[j] * P[j];
    for (int j = 0; j <= i; ++j)
      dP[j] = P[j] * (dP[j] - rowDot) * scale;
    for (int j = i + 1; j < S; ++j)
      dP[j] = 0.0f;
  }
};

/// Index: token t. Cross-entropy of its logits row against its target:
/// the loss into \p loss[t], the logit gradient scaled by \p norm.
struct CrossEntropy {
  Tokens tokens;
  int vocab;
  float norm;
  const float *logits;
  float *dlogits;
  double *loss;
  SC_HD void operator()(int t) const {
    const int V = vocab;
    const float *row = logits + static_cast<size_t>(t) * V;
    float mx = row[0];
    for (int v = 1; v < V; ++v)
      mx = row[v] > mx ? row[v] : mx;
    double sum = 0;
    for (int v = 0; v < V; ++v)
      sum += exp(static_cast<double>(row[v] - mx));
    int target = tokens.target(t);
    loss[t] = log(sum) + mx - row[target];
    for (int v = 0; v < V; ++v) {
      float p = static_cast<float>(expf(row[v] - mx) / sum);
      dlogits[static_cast<size_t>(t) * V + v] =
          (p - (v == target ? 1.0f : 0.0f)) * norm;
    }
  }
};

struct SgdStep {
  float lr;
  const float *grad;
  float *value;
  SC_HD void operator()(int i) const { value[i] -= lr * grad[i]; }
};

/// AdamW with bias corrections \p c1 and \p c2 computed by the caller.
struct AdamWStep {
  float lr, beta1, beta2, eps, weightDecay, c1, c2;
  const float *grad;
  float *value, *m, *v;
  SC_HD void operator()(int i) const {
    float g = grad[i];
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    float mh = m[i] / c1, vh = v[i] / c2;
    value[i] -= lr * (mh / (sqrtf(vh) + eps) + weightDecay * value[i]);
  }
};

} // namespace stagecraft::kernels::device

#endif // STAGECRAFT_KERNELS_DEVICE_BODIES_H
