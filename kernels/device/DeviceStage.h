//===- DeviceStage.h - The reference model on a device ----------*- C++ -*-===//
//
// The layer-wise stage of Model.h written once over a device: its
// parameters, stashes and messages live in the device's memory, its GEMMs
// are the device's (column-major, BLAS conventions, so cuBLAS and a host
// BLAS take the same calls), and everything else runs as the bodies of
// Bodies.h, one index per thread. Attention runs as strided batched GEMMs
// (Q K^T, P V and their gradients) around a causal softmax body; every
// other piece follows Model.cpp step by step, with the same F / I / W split
// and what each keeps for the next.
//
// A device provides:
//   void *allocate(size_t bytes); void release(void *, size_t bytes);
//   void upload(void *dst, const void *src, size_t bytes);
//   void download(void *dst, const void *src, size_t bytes); // waits
//   void copy(void *dst, const void *src, size_t bytes);
//   void zero(void *dst, size_t bytes);
//   template <class Body> void forEach(int n, const Body &body);
//   void gemm(bool transA, bool transB, int m, int n, int k,
//             const float *a, int lda, long long strideA,
//             const float *b, int ldb, long long strideB, float beta,
//             float *c, int ldc, long long strideC, int batch);
//     // column-major C = op(A) op(B) + beta C, batch times by the strides
//   std::string error() const; // the first failure, empty if none
// Operations are ordered as issued (one stream); after a failure a device
// skips the rest and error() names the call that failed.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_DEVICE_DEVICESTAGE_H
#define STAGECRAFT_KERNELS_DEVICE_DEVICESTAGE_H

#include "kernels/Model.h"
#include "kernels/device/Bodies.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>
#include <utility>

namespace stagecraft::kernels::device {

template <class Dev> class DeviceStage final : public LayerStage {
public:
  DeviceStage(std::unique_ptr<Dev> device, const ModelConfig &config, int index,
              int numStages, int firstLayer, int layers)
      : dev(std::move(device)), c(config), first(index == 0),
        last(index == numStages - 1) {
    if (first) {
      add("embedding");
      add("position");
    }
    for (int l = firstLayer; l < firstLayer + layers; ++l)
      for (const char *part : {"norm1", "wqkv", "wo", "norm2", "w1", "w2"})
        add("layer" + std::to_string(l) + "." + part);
    if (last) {
      add("final_norm");
      add("head");
    }
    numLayers = layers;
  }

  ~DeviceStage() override {
    stash.clear();
    params.clear();
  }

  void setStep(int s) override { currentStep = s; }
  void setDataOffset(int first) override { c.dataOffset = first; }

  /// The host copies of the parameters, brought up to date (waits).
  std::vector<Parameter> &parameters() override {
    for (size_t k = 0; k < params.size(); ++k) {
      Parameter &h = host[k];
      dev->download(h.value.data(), params[k].value.get(), h.value.size() * 4);
      dev->download(h.grad.data(), params[k].grad.get(), h.grad.size() * 4);
    }
    return host;
  }

  void zeroGrad() override {
    for (DeviceParam &p : params)
      dev->zero(p.grad.get(), p.grad.size() * 4);
  }

  void step(const OptimizerConfig &o) override {
    if (o.kind == OptimizerConfig::Kind::SGD) {
      for (DeviceParam &p : params)
        dev->forEach(static_cast<int>(p.value.size()),
                     SgdStep{o.lr, p.grad.get(), p.value.get()});
      return;
    }
    ++adamSteps;
    float c1 = 1.0f - std::pow(o.beta1, static_cast<float>(adamSteps));
    float c2 = 1.0f - std::pow(o.beta2, static_cast<float>(adamSteps));
    for (DeviceParam &p : params) {
      if (!p.m.get()) {
        p.m = Buf<float>(*dev, p.value.size());
        p.v = Buf<float>(*dev, p.value.size());
        dev->zero(p.m.get(), p.value.size() * 4);
        dev->zero(p.v.get(), p.value.size() * 4);
      }
      dev->forEach(static_cast<int>(p.value.size()),
                   AdamWStep{o.lr, o.beta1, o.beta2, o.eps, o.weightDecay, c1,
                             c2, p.grad.get(), p.value.get(), p.m.get(),
                             p.v.get()});
    }
  }

  /// The mean cross-entropy of \p mb over its tokens (waits).
  double loss(int mb) const override {
    auto it = losses.find(mb);
    if (it == losses.end())
      return 0.0;
    std::vector<double> perToken(it->second.size());
    dev->download(perToken.data(), it->second.get(), perToken.size() * 8);
    double sum = 0;
    for (double l : perToken)
      sum += l;
    return sum / static_cast<double>(perToken.size());
  }

  llvm::Error status() override {
    std::string e = misuse.empty() ? dev->error() : misuse;
    if (e.empty())
      return llvm::Error::success();
    return llvm::createStringError(llvm::inconvertibleErrorCode(), e);
  }

  void forward(int mb, const float *input, float *output) override;
  void backwardInput(int mb, const float *outputGrad,
                     float *inputGrad) override;
  void backwardWeight(int mb) override;

  Dev &device() { return *dev; }

private:
  /// A typed allocation in the device's memory.
  template <class T> class Buf {
  public:
    Buf() = default;
    Buf(Dev &d, size_t n)
        : d(&d), p(static_cast<T *>(d.allocate(n * sizeof(T)))), n(n) {}
    Buf(Buf &&o) noexcept { *this = std::move(o); }
    Buf &operator=(Buf &&o) noexcept {
      reset();
      d = o.d, p = o.p, n = o.n;
      o.p = nullptr, o.n = 0;
      return *this;
    }
    ~Buf() { reset(); }
    void reset() {
      if (p)
        d->release(p, n * sizeof(T));
      p = nullptr, n = 0;
    }
    T *get() const { return p; }
    size_t size() const { return n; }

  private:
    Dev *d = nullptr;
    T *p = nullptr;
    size_t n = 0;
  };
  using Vec = Buf<float>;

  struct DeviceParam {
    Vec value, grad, m, v;
  };
  struct Layer {
    DeviceParam *g1, *wqkv, *wo, *g2, *w1, *w2;
  };
  struct BlockStash {
    // Pre-attention half, attention, post-attention half (as Model.cpp).
    Vec x, xhat1, inv1, h1, dqkv, dh1;
    Vec qkv, probs, attn;
    Vec x1, xhat2, inv2, h2, u, act, dy1, dh2, du, dy2;
  };
  struct MicrobatchStash {
    std::vector<BlockStash> blocks;
    Vec dEmbedded;                     // first stage
    Vec xhatf, invf, hf, dlogits, dhf; // last stage
    Vec input;                         // full recomputation, not first
  };
  /// The forward of \p mb into \p st, keeping what \p mode keeps (full:
  /// one layer's intermediates at a time, dropped), as the reference stages
  /// do it (Model.h): the same code re-run on the same inputs.
  void runForward(int mb, const float *input, float *output,
                  MicrobatchStash &st, Recompute mode);

  void add(const std::string &name) {
    host.push_back(initialParameter(c, name));
    const Parameter &h = host.back();
    DeviceParam p;
    p.value = Vec(*dev, h.value.size());
    p.grad = Vec(*dev, h.value.size());
    dev->upload(p.value.get(), h.value.data(), h.value.size() * 4);
    dev->zero(p.grad.get(), h.value.size() * 4);
    params.push_back(std::move(p));
  }
  DeviceParam &param(size_t k) { return params[k]; }
  size_t layerBase() const { return first ? 2 : 0; }
  Layer layer(int l) {
    size_t k = layerBase() + 6 * static_cast<size_t>(l);
    return {&params[k],     &params[k + 1], &params[k + 2],
            &params[k + 3], &params[k + 4], &params[k + 5]};
  }
  DeviceParam &finalNorm() { return params[params.size() - 2]; }
  DeviceParam &head() { return params[params.size() - 1]; }
  Tokens tokens(int mb) const {
    return {c.seed, c.vocab, currentStep, c.dataIndex(mb), c.sequence};
  }
  Vec vec(size_t n) { return Vec(*dev, n); }
  size_t tokensTimes(int cols) const {
    return static_cast<size_t>(c.tokens()) * cols;
  }

  /// Row-major C (m x n) (+)= op(A) op(B), batched by the strides: the
  /// column-major call for C^T = op(B)^T op(A)^T.
  void gemm(bool tA, bool tB, int m, int n, int k, const float *a, int lda,
            const float *b, int ldb, float *cm, int ldc, bool accumulate,
            int batch = 1, long long sA = 0, long long sB = 0,
            long long sC = 0) {
    dev->gemm(tB, tA, n, m, k, b, ldb, sB, a, lda, sA, accumulate ? 1.0f : 0.0f,
              cm, ldc, sC, batch);
  }
  /// Dense row-major operands (the leading dimensions follow the shapes).
  void mm(bool tA, bool tB, int m, int n, int k, const float *a, const float *b,
          float *cm, bool accumulate) {
    gemm(tA, tB, m, n, k, a, tA ? m : k, b, tB ? k : n, cm, n, accumulate);
  }
  void copy(Vec &dst, const float *src, size_t n) {
    dst = vec(n);
    dev->copy(dst.get(), src, n * 4);
  }

  void rms(int rows, int cols, const float *x, const float *g, Vec &y,
           Vec &xhat, Vec &inv) {
    y = vec(static_cast<size_t>(rows) * cols);
    xhat = vec(static_cast<size_t>(rows) * cols);
    inv = vec(rows);
    dev->forEach(rows, RmsForward{cols, x, g, y.get(), xhat.get(), inv.get()});
  }

  void attentionForward(BlockStash &s);
  void attentionBackward(BlockStash &s, const float *dattn, float *dqkv);

  std::unique_ptr<Dev> dev;
  ModelConfig c;
  bool first, last;
  int numLayers = 0;
  int currentStep = 0;
  int adamSteps = 0;
  std::vector<Parameter> host;
  std::vector<DeviceParam> params;
  std::map<int, MicrobatchStash> stash;
  std::map<int, Buf<double>> losses;
  /// A call out of order (I before F, W before I), reported by status().
  std::string misuse;
};

template <class Dev> void DeviceStage<Dev>::attentionForward(BlockStash &s) {
  const int B = c.batch, S = c.sequence, H = c.hidden, nh = c.heads,
            dh = H / nh;
  const long long SS = static_cast<long long>(S) * S;
  s.probs = vec(static_cast<size_t>(B) * nh * SS);
  s.attn = vec(tokensTimes(H));
  for (int b = 0; b < B; ++b) {
    const float *q = s.qkv.get() + static_cast<size_t>(b) * S * 3 * H;
    gemm(false, true, S, S, dh, q, 3 * H, q + H, 3 * H,
         s.probs.get() + b * nh * SS, S, false, nh, dh, dh, SS);
  }
  dev->forEach(B * nh * S,
               CausalSoftmax{S, 1.0f / std::sqrt(static_cast<float>(dh)),
                             s.probs.get()});
  for (int b = 0; b < B; ++b) {
    const float *q = s.qkv.get() + static_cast<size_t>(b) * S * 3 * H;
    gemm(false, false, S, dh, S, s.probs.get() + b * nh * SS, S, q + 2 * H,
         3 * H, s.attn.get() + static_cast<size_t>(b) * S * H, H, false, nh, SS,
         dh, dh);
  }
}

template <class Dev>
void DeviceStage<Dev>::attentionBackward(BlockStash &s, const float *dattn,
                                         float *dqkv) {
  const int B = c.batch, S = c.sequence, H = c.hidden, nh = c.heads,
            dh = H / nh;
  const long long SS = static_cast<long long>(S) * S;
  Vec dS = vec(static_cast<size_t>(B) * nh * SS);
  for (int b = 0; b < B; ++b) {
    const float *q = s.qkv.get() + static_cast<size_t>(b) * S * 3 * H;
    gemm(false, true, S, S, dh, dattn + static_cast<size_t>(b) * S * H, H,
         q + 2 * H, 3 * H, dS.get() + b * nh * SS, S, false, nh, dh, dh, SS);
  }
  dev->forEach(B * nh * S, CausalSoftmaxBackward{
                               S, 1.0f / std::sqrt(static_cast<float>(dh)),
                               s.probs.get(), dS.get()});
  for (int b = 0; b < B; ++b) {
    const float *q = s.qkv.get() + static_cast<size_t>(b) * S * 3 * H;
    const float *dO = dattn + static_cast<size_t>(b) * S * H;
    float *dq = dqkv + static_cast<size_t>(b) * S * 3 * H;
    const float *dSb = dS.get() + b * nh * SS, *P = s.probs.get() + b * nh * SS;
    // dQ = dS K, dK = dS^T Q, dV = P^T dO.
    gemm(false, false, S, dh, S, dSb, S, q + H, 3 * H, dq, 3 * H, false, nh, SS,
         dh, dh);
    gemm(true, false, S, dh, S, dSb, S, q, 3 * H, dq + H, 3 * H, false, nh, SS,
         dh, dh);
    gemm(true, false, S, dh, S, P, S, dO, H, dq + 2 * H, 3 * H, false, nh, SS,
         dh, dh);
  }
}

template <class Dev>
void DeviceStage<Dev>::forward(int mb, const float *input, float *output) {
  MicrobatchStash &st = stash[mb];
  st = MicrobatchStash{};
  Recompute mode = this->recomputeOf(mb);
  if (mode == Recompute::Full && !first)
    copy(st.input, input, tokensTimes(c.hidden));
  runForward(mb, input, output, st, mode);
}

template <class Dev>
void DeviceStage<Dev>::runForward(int mb, const float *input, float *output,
                                  MicrobatchStash &st, Recompute mode) {
  const int T = c.tokens(), H = c.hidden, F = c.ffn(), V = c.vocab;
  const bool full = mode == Recompute::Full;
  BlockStash scratch;
  MicrobatchStash scratchHead;
  st.blocks.clear();
  st.blocks.resize(full ? 0 : numLayers);
  Vec x = vec(tokensTimes(H));
  if (first)
    dev->forEach(T * H, EmbedForward{tokens(mb), H, param(0).value.get(),
                                     param(1).value.get(), x.get()});
  else
    dev->copy(x.get(), input, tokensTimes(H) * 4);
  for (int l = 0; l < numLayers; ++l) {
    Layer w = layer(l);
    if (full)
      scratch = BlockStash{};
    BlockStash &s = full ? scratch : st.blocks[l];
    // Pre-attention: qkv = RMSNorm(x) Wqkv.
    s.x = std::move(x);
    rms(T, H, s.x.get(), w.g1->value.get(), s.h1, s.xhat1, s.inv1);
    s.qkv = vec(tokensTimes(3 * H));
    mm(false, false, T, 3 * H, H, s.h1.get(), w.wqkv->value.get(), s.qkv.get(),
       false);
    attentionForward(s);
    if (mode == Recompute::Selective)
      s.probs.reset();
    // Post-attention: x1 = x + attn Wo; out = x1 + GELU(RMSNorm(x1) W1) W2.
    copy(s.x1, s.x.get(), tokensTimes(H));
    mm(false, false, T, H, H, s.attn.get(), w.wo->value.get(), s.x1.get(),
       true);
    rms(T, H, s.x1.get(), w.g2->value.get(), s.h2, s.xhat2, s.inv2);
    s.u = vec(tokensTimes(F));
    mm(false, false, T, F, H, s.h2.get(), w.w1->value.get(), s.u.get(), false);
    s.act = vec(tokensTimes(F));
    dev->forEach(T * F, GeluForward{s.u.get(), s.act.get()});
    copy(x, s.x1.get(), tokensTimes(H));
    mm(false, false, T, H, F, s.act.get(), w.w2->value.get(), x.get(), true);
  }
  if (!last) {
    dev->copy(output, x.get(), tokensTimes(H) * 4);
    return;
  }
  // Final norm, head, cross-entropy (mean over tokens and microbatches).
  MicrobatchStash &h = full ? scratchHead : st;
  rms(T, H, x.get(), finalNorm().value.get(), h.hf, h.xhatf, h.invf);
  Vec logits = vec(tokensTimes(V));
  mm(false, false, T, V, H, h.hf.get(), head().value.get(), logits.get(),
     false);
  h.dlogits = vec(tokensTimes(V));
  Buf<double> perToken(*dev, T);
  const float norm = 1.0f / (static_cast<float>(T) * c.microbatches);
  dev->forEach(T, CrossEntropy{tokens(mb), V, norm, logits.get(),
                               h.dlogits.get(), perToken.get()});
  losses[mb] = std::move(perToken);
}

template <class Dev>
void DeviceStage<Dev>::backwardInput(int mb, const float *outputGrad,
                                     float *inputGrad) {
  const int T = c.tokens(), H = c.hidden, F = c.ffn(), V = c.vocab;
  auto found = stash.find(mb);
  if (found == stash.end()) {
    misuse =
        fmt::format("backward input of microbatch {} before its forward", mb);
    return;
  }
  MicrobatchStash &st = found->second;
  // Re-derive what the forward did not keep: the same code on the same
  // inputs, so the stash is bitwise the one a plain forward keeps.
  switch (this->recomputeOf(mb)) {
  case Recompute::None:
    break;
  case Recompute::Full: {
    Vec in = std::move(st.input);
    Vec out = vec(last ? 1 : tokensTimes(H));
    runForward(mb, first ? nullptr : in.get(), out.get(), st, Recompute::None);
    break;
  }
  case Recompute::Selective:
    for (BlockStash &s : st.blocks)
      attentionForward(s);
    break;
  }
  Vec dx = vec(tokensTimes(H));
  if (last) {
    st.dhf = vec(tokensTimes(H));
    mm(false, true, T, H, V, st.dlogits.get(), head().value.get(), st.dhf.get(),
       false);
    dev->forEach(T, RmsBackwardInput{H, st.dhf.get(), finalNorm().value.get(),
                                     st.xhatf.get(), st.invf.get(), dx.get(),
                                     false});
  } else {
    dev->copy(dx.get(), outputGrad, tokensTimes(H) * 4);
  }
  for (int l = numLayers; l-- > 0;) {
    Layer w = layer(l);
    BlockStash &s = st.blocks[l];
    Vec din = vec(tokensTimes(H));
    // Post-attention half.
    s.dy2 = std::move(dx);
    Vec dact = vec(tokensTimes(F));
    mm(false, true, T, F, H, s.dy2.get(), w.w2->value.get(), dact.get(), false);
    s.du = vec(tokensTimes(F));
    dev->forEach(T * F, GeluBackward{dact.get(), s.u.get(), s.du.get()});
    s.dh2 = vec(tokensTimes(H));
    mm(false, true, T, H, F, s.du.get(), w.w1->value.get(), s.dh2.get(), false);
    copy(s.dy1, s.dy2.get(), tokensTimes(H));
    dev->forEach(T, RmsBackwardInput{H, s.dh2.get(), w.g2->value.get(),
                                     s.xhat2.get(), s.inv2.get(), s.dy1.get(),
                                     true});
    dev->copy(din.get(), s.dy1.get(), tokensTimes(H) * 4);
    Vec dattn = vec(tokensTimes(H));
    mm(false, true, T, H, H, s.dy1.get(), w.wo->value.get(), dattn.get(),
       false);
    // Attention, then the pre-attention half.
    s.dqkv = vec(tokensTimes(3 * H));
    attentionBackward(s, dattn.get(), s.dqkv.get());
    s.dh1 = vec(tokensTimes(H));
    mm(false, true, T, H, 3 * H, s.dqkv.get(), w.wqkv->value.get(), s.dh1.get(),
       false);
    dev->forEach(T, RmsBackwardInput{H, s.dh1.get(), w.g1->value.get(),
                                     s.xhat1.get(), s.inv1.get(), din.get(),
                                     true});
    // What only F needed goes; W keeps its inputs and output gradients.
    s.probs.reset();
    s.u.reset();
    s.x.reset();
    s.x1.reset();
    s.qkv.reset();
    dx = std::move(din);
  }
  if (first)
    st.dEmbedded = std::move(dx);
  else
    dev->copy(inputGrad, dx.get(), tokensTimes(H) * 4);
}

template <class Dev> void DeviceStage<Dev>::backwardWeight(int mb) {
  const int T = c.tokens(), H = c.hidden, F = c.ffn(), V = c.vocab;
  auto it = stash.find(mb);
  // I keeps every layer's dqkv: without it, I has not run.
  if (it == stash.end() ||
      (numLayers > 0 && !it->second.blocks[0].dqkv.get())) {
    misuse = fmt::format("backward weight of microbatch {} before its "
                         "backward input",
                         mb);
    return;
  }
  MicrobatchStash &st = it->second;
  if (last) {
    mm(true, false, H, V, T, st.hf.get(), st.dlogits.get(), head().grad.get(),
       true);
    dev->forEach(H, RmsBackwardWeight{T, H, st.dhf.get(), st.xhatf.get(),
                                      finalNorm().grad.get()});
  }
  for (int l = numLayers; l-- > 0;) {
    Layer w = layer(l);
    BlockStash &s = st.blocks[l];
    mm(true, false, F, H, T, s.act.get(), s.dy2.get(), w.w2->grad.get(), true);
    mm(true, false, H, F, T, s.h2.get(), s.du.get(), w.w1->grad.get(), true);
    dev->forEach(H, RmsBackwardWeight{T, H, s.dh2.get(), s.xhat2.get(),
                                      w.g2->grad.get()});
    mm(true, false, H, H, T, s.attn.get(), s.dy1.get(), w.wo->grad.get(), true);
    mm(true, false, H, 3 * H, T, s.h1.get(), s.dqkv.get(), w.wqkv->grad.get(),
       true);
    dev->forEach(H, RmsBackwardWeight{T, H, s.dh1.get(), s.xhat1.get(),
                                      w.g1->grad.get()});
  }
  if (first)
    dev->forEach(H,
                 EmbedBackwardWeight{tokens(mb), H, T, st.dEmbedded.get(),
                                     param(0).grad.get(), param(1).grad.get()});
  stash.erase(it);
}

} // namespace stagecraft::kernels::device

#endif // STAGECRAFT_KERNELS_DEVICE_DEVICESTAGE_H
