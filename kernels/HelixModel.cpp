//===- HelixModel.cpp - The reference model cut at attention --------------===//
//
// See HelixModel.h. The arithmetic is Model.cpp's, regrouped: every
// parameter's gradient comes from the same operations in the same order.
//
//===----------------------------------------------------------------------===//

#include "kernels/HelixModel.h"
#include "kernels/ModelEnds.h"
#include "kernels/Ops.h"

#include <fmt/format.h>

#include <cassert>

using namespace stagecraft::kernels;
using namespace stagecraft::kernels::ops;

namespace {
using Vec = std::vector<float>;

struct Kept {
  // Post-attention part of layer index - 1.
  Vec xPrev, attn, x1, xhat2, inv2, h2, u, act;
  Vec dy1, dh2, du, dy2;
  // Pre-attention part of layer index.
  Vec x, xhat1, inv1, h1, dqkv, dh1;
  ends::EmbedStash embed; // first block
  ends::HeadStash head;   // last block: final norm, head, loss
};
} // namespace

struct HelixBlock::Impl {
  ModelConfig c;
  int index, layers;
  bool first, last, recompute = false;
  int step = 0;
  std::vector<Parameter> params;
  Parameter *embedding = nullptr, *position = nullptr, *wo = nullptr,
            *g2 = nullptr, *w1 = nullptr, *w2 = nullptr, *g1 = nullptr,
            *wqkv = nullptr, *gf = nullptr, *head = nullptr;
  std::map<int, Kept> kept;
  std::map<int, double> losses;

  /// The forward of microbatch \p mb into \p k, writing the outputs.
  void compute(int mb, Kept &k, const float *residual, const float *attention,
               float *residualOut, float *qkvOut);
};

HelixBlock::HelixBlock(const ModelConfig &config, int index, int layers,
                       bool recompute)
    : impl(std::make_unique<Impl>()) {
  Impl &m = *impl;
  m.recompute = recompute;
  m.c = config;
  m.index = index;
  m.layers = layers;
  m.first = index == 0;
  m.last = index == layers;
  std::vector<std::pair<std::string, Parameter **>> names;
  if (m.first) {
    names.push_back({"embedding", &m.embedding});
    names.push_back({"position", &m.position});
  }
  if (!m.first) {
    int l = index - 1;
    names.push_back({fmt::format("layer{}.wo", l), &m.wo});
    names.push_back({fmt::format("layer{}.norm2", l), &m.g2});
    names.push_back({fmt::format("layer{}.w1", l), &m.w1});
    names.push_back({fmt::format("layer{}.w2", l), &m.w2});
  }
  if (!m.last) {
    names.push_back({fmt::format("layer{}.norm1", index), &m.g1});
    names.push_back({fmt::format("layer{}.wqkv", index), &m.wqkv});
  } else {
    names.push_back({"final_norm", &m.gf});
    names.push_back({"head", &m.head});
  }
  for (auto &[name, slot] : names)
    m.params.push_back(initialParameter(config, name));
  for (size_t k = 0; k < names.size(); ++k)
    *names[k].second = &m.params[k];
}

HelixBlock::~HelixBlock() = default;
HelixBlock::HelixBlock(HelixBlock &&) noexcept = default;

void HelixBlock::setStep(int step) { impl->step = step; }
std::vector<Parameter> &HelixBlock::parameters() { return impl->params; }

double HelixBlock::loss(int mb) const {
  auto it = impl->losses.find(mb);
  return it == impl->losses.end() ? 0.0 : it->second;
}

void HelixBlock::forward(int mb, const float *residual, const float *attention,
                         float *residualOut, float *qkvOut) {
  Impl &m = *impl;
  Kept &k = m.kept[mb];
  m.compute(mb, k, residual, attention, residualOut, qkvOut);
  if (m.recompute) {
    // Keep the inputs (and the tokens) only; the backward recomputes.
    Kept inputs;
    inputs.xPrev = std::move(k.xPrev);
    inputs.attn = std::move(k.attn);
    inputs.embed.tokens = std::move(k.embed.tokens);
    k = std::move(inputs);
  }
}

void HelixBlock::Impl::compute(int mb, Kept &k, const float *residual,
                               const float *attention, float *residualOut,
                               float *qkvOut) {
  Impl &m = *this;
  const int T = m.c.tokens(), H = m.c.hidden, F = m.c.ffn();
  Vec x(static_cast<size_t>(T) * H);
  if (m.first) {
    ends::embedForward(m.c, m.step, mb, *m.embedding, *m.position, k.embed,
                       x.data());
  } else {
    // Post-attention part of the layer below: x1 = x + attn Wo, then MLP.
    if (residual != k.xPrev.data())
      k.xPrev.assign(residual, residual + x.size());
    if (attention != k.attn.data())
      k.attn.assign(attention, attention + x.size());
    k.x1 = k.xPrev;
    gemm(false, false, T, H, H, k.attn.data(), m.wo->value.data(), k.x1.data(),
         true);
    k.xhat2.resize(x.size());
    k.inv2.resize(T);
    k.h2.resize(x.size());
    rmsForward(T, H, k.x1.data(), m.g2->value.data(), k.h2.data(),
               k.xhat2.data(), k.inv2.data());
    k.u.resize(static_cast<size_t>(T) * F);
    gemm(false, false, T, F, H, k.h2.data(), m.w1->value.data(), k.u.data(),
         false);
    k.act.resize(k.u.size());
    for (size_t i = 0; i < k.u.size(); ++i)
      k.act[i] = gelu(k.u[i]);
    x = k.x1;
    gemm(false, false, T, H, F, k.act.data(), m.w2->value.data(), x.data(),
         true);
  }
  if (!m.last) {
    // Pre-attention part of this layer.
    k.x = x;
    k.xhat1.resize(x.size());
    k.inv1.resize(T);
    k.h1.resize(x.size());
    rmsForward(T, H, k.x.data(), m.g1->value.data(), k.h1.data(),
               k.xhat1.data(), k.inv1.data());
    gemm(false, false, T, 3 * H, H, k.h1.data(), m.wqkv->value.data(), qkvOut,
         false);
    std::copy(x.begin(), x.end(), residualOut);
    return;
  }
  m.losses[mb] = ends::headForward(m.c, m.step, mb, *m.gf, *m.head,
                                   x.data(), k.head);
}

void HelixBlock::backwardInput(int mb, const float *residualGrad,
                               const float *qkvGrad, float *residualInGrad,
                               float *attentionInGrad) {
  Impl &m = *impl;
  const int T = m.c.tokens(), H = m.c.hidden, F = m.c.ffn();
  Kept &k = m.kept.at(mb);
  if (m.recompute) {
    // The same forward again from the kept inputs, outputs discarded.
    Vec residualOut(static_cast<size_t>(T) * H), qkvOut(3 * residualOut.size());
    m.compute(mb, k, m.first ? nullptr : k.xPrev.data(),
              m.first ? nullptr : k.attn.data(), residualOut.data(),
              qkvOut.data());
  }
  Vec dx(static_cast<size_t>(T) * H);
  if (m.last) {
    ends::headBackwardInput(m.c, *m.gf, *m.head, k.head, dx.data());
  } else {
    std::copy(residualGrad, residualGrad + dx.size(), dx.begin());
    k.dqkv.assign(qkvGrad, qkvGrad + static_cast<size_t>(T) * 3 * H);
    k.dh1.resize(dx.size());
    gemm(false, true, T, H, 3 * H, k.dqkv.data(), m.wqkv->value.data(),
         k.dh1.data(), false);
    rmsBackwardInput(T, H, k.dh1.data(), m.g1->value.data(), k.xhat1.data(),
                     k.inv1.data(), dx.data(), true);
  }
  if (m.first) {
    k.embed.dEmbedded = dx;
    return;
  }
  // Post-attention part of the layer below.
  k.dy2 = dx;
  Vec dact(static_cast<size_t>(T) * F);
  gemm(false, true, T, F, H, k.dy2.data(), m.w2->value.data(), dact.data(),
       false);
  k.du.resize(dact.size());
  for (size_t i = 0; i < dact.size(); ++i)
    k.du[i] = dact[i] * geluGrad(k.u[i]);
  k.dh2.resize(dx.size());
  gemm(false, true, T, H, F, k.du.data(), m.w1->value.data(), k.dh2.data(),
       false);
  Vec dx1(k.dy2);
  rmsBackwardInput(T, H, k.dh2.data(), m.g2->value.data(), k.xhat2.data(),
                   k.inv2.data(), dx1.data(), true);
  k.dy1 = dx1;
  std::copy(dx1.begin(), dx1.end(), residualInGrad);
  gemm(false, true, T, H, H, k.dy1.data(), m.wo->value.data(), attentionInGrad,
       false);
}

void HelixBlock::backwardWeight(int mb) {
  Impl &m = *impl;
  const int T = m.c.tokens(), H = m.c.hidden, F = m.c.ffn();
  auto it = m.kept.find(mb);
  assert(it != m.kept.end() && "W before F");
  Kept &k = it->second;
  if (m.last)
    ends::headBackwardWeight(m.c, k.head, *m.gf, *m.head);
  if (!m.first) {
    gemm(true, false, F, H, T, k.act.data(), k.dy2.data(), m.w2->grad.data(),
         true);
    gemm(true, false, H, F, T, k.h2.data(), k.du.data(), m.w1->grad.data(),
         true);
    rmsBackwardWeight(T, H, k.dh2.data(), k.xhat2.data(), m.g2->grad.data());
    gemm(true, false, H, H, T, k.attn.data(), k.dy1.data(), m.wo->grad.data(),
         true);
  }
  if (!m.last) {
    gemm(true, false, H, 3 * H, T, k.h1.data(), k.dqkv.data(),
         m.wqkv->grad.data(), true);
    rmsBackwardWeight(T, H, k.dh1.data(), k.xhat1.data(), m.g1->grad.data());
  }
  if (m.first)
    ends::embedBackwardWeight(m.c, k.embed, *m.embedding, *m.position);
  m.kept.erase(it);
}

void HelixAttention::forward(int mb, const float *qkv, float *out) {
  const ModelConfig &c = config;
  Kept &k = kept[mb];
  k.qkv.assign(qkv, qkv + static_cast<size_t>(c.tokens()) * 3 * c.hidden);
  attentionForward(c.batch, c.sequence, c.hidden, c.heads, k.qkv.data(), out,
                   k.probs);
}

void HelixAttention::backward(int mb, const float *outGrad, float *qkvGrad) {
  const ModelConfig &c = config;
  auto it = kept.find(mb);
  assert(it != kept.end() && "attention backward before its forward");
  attentionBackward(c.batch, c.sequence, c.hidden, c.heads, it->second.qkv.data(),
                    it->second.probs, outGrad, qkvGrad);
  kept.erase(it);
}
