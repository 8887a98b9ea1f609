//===- HelixModel.cpp - The reference model cut at attention --------------===//
//
// See HelixModel.h. The arithmetic is Model.cpp's, regrouped: every
// parameter's gradient comes from the same operations in the same order.
//
//===----------------------------------------------------------------------===//

#include "kernels/HelixModel.h"
#include "kernels/ModelParts.h"
#include "kernels/Ops.h"

#include <fmt/format.h>

#include <cassert>

using namespace stagecraft::kernels;
using namespace stagecraft::kernels::ops;

namespace {
using Vec = std::vector<float>;

struct Kept {
  // Post-attention half of layer index - 1: its inputs and what it keeps.
  Vec xPrev, attn;
  parts::PostStash post;
  // Pre-attention half of layer index.
  parts::PreStash pre;
  parts::EmbedStash embed; // first block
  parts::HeadStash head;   // last block: final norm, head, loss
};
} // namespace

struct HelixBlock::Impl {
  ModelConfig c;
  int index, layers;
  bool first, last;
  std::function<bool(int)> recompute;
  bool recomputes(int mb) const { return recompute && recompute(mb); }
  int step = 0;
  std::vector<Parameter> params;
  Parameter *embedding = nullptr, *position = nullptr, *gf = nullptr,
            *head = nullptr;
  // The post-attention half of layer index - 1 (wo, g2, w1, w2) and the
  // pre-attention half of layer index (g1, wqkv).
  parts::LayerParams post, pre;
  std::map<int, Kept> kept;
  std::map<int, double> losses;

  /// The forward of microbatch \p mb into \p k, writing the outputs.
  void compute(int mb, Kept &k, const float *residual, const float *attention,
               float *residualOut, float *qkvOut);
};

HelixBlock::HelixBlock(const ModelConfig &config, int index, int layers,
                       std::function<bool(int)> recompute)
    : impl(std::make_unique<Impl>()) {
  Impl &m = *impl;
  m.recompute = std::move(recompute);
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
    names.push_back({fmt::format("layer{}.wo", l), &m.post.wo});
    names.push_back({fmt::format("layer{}.norm2", l), &m.post.g2});
    names.push_back({fmt::format("layer{}.w1", l), &m.post.w1});
    names.push_back({fmt::format("layer{}.w2", l), &m.post.w2});
  }
  if (!m.last) {
    names.push_back({fmt::format("layer{}.norm1", index), &m.pre.g1});
    names.push_back({fmt::format("layer{}.wqkv", index), &m.pre.wqkv});
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
void HelixBlock::setDataOffset(int first) { impl->c.dataOffset = first; }
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
  if (m.recomputes(mb)) {
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
  Vec x(static_cast<size_t>(m.c.tokens()) * m.c.hidden);
  if (m.first) {
    parts::embedForward(m.c, m.step, mb, *m.embedding, *m.position, k.embed,
                        x.data());
  } else {
    if (residual != k.xPrev.data())
      k.xPrev.assign(residual, residual + x.size());
    if (attention != k.attn.data())
      k.attn.assign(attention, attention + x.size());
    parts::postForward(m.c, m.post, k.post, k.xPrev.data(), k.attn.data(),
                       x.data());
  }
  if (!m.last) {
    parts::preForward(m.c, m.pre, k.pre, x.data(), qkvOut);
    std::copy(x.begin(), x.end(), residualOut);
    return;
  }
  m.losses[mb] =
      parts::headForward(m.c, m.step, mb, *m.gf, *m.head, x.data(), k.head);
}

void HelixBlock::backwardInput(int mb, const float *residualGrad,
                               const float *qkvGrad, float *residualInGrad,
                               float *attentionInGrad) {
  Impl &m = *impl;
  const int T = m.c.tokens(), H = m.c.hidden;
  Kept &k = m.kept.at(mb);
  if (m.recomputes(mb)) {
    // The same forward again from the kept inputs, outputs discarded.
    Vec residualOut(static_cast<size_t>(T) * H), qkvOut(3 * residualOut.size());
    m.compute(mb, k, m.first ? nullptr : k.xPrev.data(),
              m.first ? nullptr : k.attn.data(), residualOut.data(),
              qkvOut.data());
  }
  Vec dx(static_cast<size_t>(T) * H);
  if (m.last) {
    parts::headBackwardInput(m.c, *m.gf, *m.head, k.head, dx.data());
  } else {
    std::copy(residualGrad, residualGrad + dx.size(), dx.begin());
    parts::preBackwardInput(m.c, m.pre, k.pre, qkvGrad, dx.data());
  }
  if (m.first) {
    k.embed.dEmbedded = dx;
    return;
  }
  parts::postBackwardInput(m.c, m.post, k.post, dx.data(), residualInGrad,
                           attentionInGrad);
}

void HelixBlock::backwardWeight(int mb) {
  Impl &m = *impl;
  auto it = m.kept.find(mb);
  assert(it != m.kept.end() && "W before F");
  Kept &k = it->second;
  if (m.last)
    parts::headBackwardWeight(m.c, k.head, *m.gf, *m.head);
  if (!m.first)
    parts::postBackwardWeight(m.c, m.post, k.post, k.attn.data());
  if (!m.last)
    parts::preBackwardWeight(m.c, m.pre, k.pre);
  if (m.first)
    parts::embedBackwardWeight(m.c, k.embed, *m.embedding, *m.position);
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
  attentionBackward(c.batch, c.sequence, c.hidden, c.heads,
                    it->second.qkv.data(), it->second.probs, outGrad, qkvGrad);
  kept.erase(it);
}
