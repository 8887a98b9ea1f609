//===- Model.cpp - Reference transformer stages with split backward -------===//
//
// Shapes: T = batch x sequence tokens per microbatch, H hidden, F = 4H, V
// vocab. Row-major matrices; a linear layer is Y = X W with W of in x out.
// For every linear layer, I computes dX = dY W^T and keeps dY; W computes
// dW += X^T dY from the X kept by F. RMSNorm gains and embeddings follow the
// same split.
//
//===----------------------------------------------------------------------===//

#include "kernels/Model.h"

#include "kernels/ModelParts.h"
#include "kernels/Ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>

using namespace stagecraft::kernels;
using stagecraft::kernels::ops::mix;

llvm::Error ModelConfig::validate() const {
  auto fail = [](std::string what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
  };
  if (hidden < 1 || heads < 1 || hidden % heads != 0)
    return fail(fmt::format("hidden ({}) must be a positive multiple of heads "
                            "({})",
                            hidden, heads));
  if (sequence < 1 || vocab < 2 || batch < 1 || microbatches < 1)
    return fail(fmt::format("sequence ({}), batch ({}) and microbatches ({}) "
                            "must be at least 1 and vocab ({}) at least 2",
                            sequence, batch, microbatches, vocab));
  if (!lengths.empty() && static_cast<int>(lengths.size()) != microbatches)
    return fail(fmt::format("{} lengths for {} microbatches", lengths.size(),
                            microbatches));
  for (size_t k = 0; k < lengths.size(); ++k)
    if (lengths[k] < 1 || lengths[k] > sequence)
      return fail(fmt::format("microbatch {} is {} tokens long; lengths must "
                              "be in 1..{} (the longest)",
                              k, lengths[k], sequence));
  // Kernels index tensors with int: every tensor stays below 2^31 elements
  // (products in double, so the check itself cannot overflow).
  const double tokensD = double(batch) * sequence;
  const struct {
    const char *name;
    double elements;
  } tensors[] = {
      {"tokens x hidden (batch x seq x hidden)", tokensD * hidden},
      {"tokens x ffn (batch x seq x 4 hidden)", tokensD * 4.0 * hidden},
      {"attention probabilities (batch x heads x seq x seq)",
       double(batch) * heads * sequence * double(sequence)},
      {"logits (batch x seq x vocab)", tokensD * vocab},
      {"embedding (vocab x hidden)", double(vocab) * hidden},
      {"ffn weight (hidden x 4 hidden)", 4.0 * hidden * double(hidden)},
  };
  for (const auto &t : tensors)
    if (t.elements > kMaxTensorElements)
      return fail(fmt::format("the model's {} tensor has {:.4g} elements, "
                              "above the limit of {} (2^31 - 1)",
                              t.name, t.elements, kMaxTensorElements));
  return llvm::Error::success();
}

double ModelConfig::estimateBytes(int layers, int inFlight) const {
  const double h = hidden, tokensD = double(batch) * sequence;
  // Parameters with gradient and AdamW's two moments.
  double params = double(vocab) * h * 2 + double(sequence) * h +
                  layers * (12.0 * h * h + 4 * h) + h;
  // What one microbatch keeps per layer for its backward, and the logits.
  double perLayer = tokensD * (16 * h) +
                    double(batch) * heads * sequence * double(sequence) * 2;
  double perMicrobatch = layers * perLayer + tokensD * vocab * 2;
  return 4.0 * (4 * params + double(inFlight) * perMicrobatch);
}

int stagecraft::kernels::syntheticToken(const ModelConfig &c, int step, int mb,
                                        int t) {
  return device::syntheticToken(c.seed, c.vocab, step, c.dataIndex(mb), t);
}

int stagecraft::kernels::syntheticTarget(const ModelConfig &c, int step, int mb,
                                         int t) {
  return device::syntheticTarget(c.seed, c.vocab, step, c.dataIndex(mb), t);
}

namespace {
using namespace stagecraft::kernels::ops;

using Vec = std::vector<float>;

using BlockParams = parts::LayerParams;

/// What a block keeps between F, I and W for one microbatch.
struct BlockStash {
  parts::PreStash pre;
  Vec qkv, probs, attn;
  parts::PostStash post;
};

struct MicrobatchStash {
  std::vector<BlockStash> blocks;
  parts::EmbedStash embed; // first stage
  parts::HeadStash head;   // last stage
  /// Full recomputation: the stage's input (not on the first stage).
  Vec input;
};

/// Activation bytes \p st holds: the tensors forwards made and keep, not the
/// output gradients I keeps for W.
int64_t heldBytes(const MicrobatchStash &st) {
  size_t floats = st.input.size() + st.embed.tokens.size() +
                  st.head.xhatf.size() + st.head.invf.size() +
                  st.head.hf.size() + st.head.dlogits.size();
  for (const BlockStash &b : st.blocks)
    floats += b.pre.x.size() + b.pre.xhat1.size() + b.pre.inv1.size() +
              b.pre.h1.size() + b.qkv.size() + b.probs.size() + b.attn.size() +
              b.post.x1.size() + b.post.xhat2.size() + b.post.inv2.size() +
              b.post.h2.size() + b.post.u.size() + b.post.act.size();
  return static_cast<int64_t>(floats) * 4;
}
} // namespace

ActivationBytes stagecraft::kernels::activationBytes(const ModelConfig &c,
                                                     int index, int numStages,
                                                     int layers) {
  const double T = c.tokens(), H = c.hidden, V = c.vocab;
  const double probs = double(c.batch) * c.heads * c.sequence * c.sequence;
  // Per layer after F: pre (x, xhat1, h1, inv1), Q K V, probabilities, the
  // attention output, post (x1, xhat2, h2, inv2, u and its GELU at 4H).
  const double layerF = 18 * T * H + 2 * T + probs;
  // I drops the probabilities, u, the pre-norm input and x1.
  const double layerW = layerF - probs - 4 * T * H - T * H - T * H;
  double edges = 0;
  if (index == 0)
    edges += T; // tokens
  if (index == numStages - 1)
    edges += 2 * T * H + T + T * V; // final norm, and the logit gradient
  ActivationBytes b;
  b.activation = 4 * (layers * layerF + edges);
  b.weightGrad = 4 * (layers * layerW + edges);
  b.recomputed = index == 0 ? 0.0 : 4 * T * H;
  b.selective = b.activation - 4 * layers * probs;
  return b;
}

struct Stage::Impl {
  ModelConfig c;
  int index, numStages, firstLayer, layers;
  bool first, last;
  int step = 0;
  std::vector<Parameter> params;
  std::vector<BlockParams> blocks;
  Parameter *embedding = nullptr, *position = nullptr, *gf = nullptr,
            *head = nullptr;
  std::map<int, MicrobatchStash> stash;
  std::map<int, double> losses;
  ActivationMeter *meter = nullptr;
  /// Bytes last reported to the meter per microbatch.
  std::map<int, int64_t> reported;

  /// Reports the change in what microbatch \p mb holds.
  void account(int mb) {
    if (!meter)
      return;
    auto it = stash.find(mb);
    int64_t now = it == stash.end() ? 0 : heldBytes(it->second);
    int64_t &before = reported[mb];
    meter->change(now - before);
    before = now;
    if (now == 0)
      reported.erase(mb);
  }
  /// The forward of \p mb from \p input into \p st, keeping what \p mode
  /// keeps (full: one layer's intermediates at a time, dropped).
  void runForward(int mb, const float *input, float *output,
                  MicrobatchStash &st, Recompute mode);

  void add(const std::string &name) {
    params.push_back(initialParameter(c, name));
    params.back().name = c.prefix + name;
  }

  // The block functions take the microbatch's shape, \p c.
  void blockForward(const ModelConfig &c, const BlockParams &w, BlockStash &s,
                    const float *in, float *out);
  void blockBackwardInput(const ModelConfig &c, const BlockParams &w,
                          BlockStash &s, const float *dout, float *din);
  void blockBackwardWeight(const ModelConfig &c, const BlockParams &w,
                           BlockStash &s);
};

Stage::Stage(const ModelConfig &config, int index, int numStages,
             int firstLayer, int layers)
    : impl(std::make_unique<Impl>()) {
  Impl &m = *impl;
  m.c = config;
  m.index = index;
  m.numStages = numStages;
  m.firstLayer = firstLayer;
  m.layers = layers;
  m.first = index == 0;
  m.last = index == numStages - 1;
  // Pointers are taken once every parameter exists (the vector is final).
  if (m.first) {
    m.add("embedding");
    m.add("position");
  }
  for (int l = firstLayer; l < firstLayer + layers; ++l)
    for (const char *part : {"norm1", "wqkv", "wo", "norm2", "w1", "w2"})
      m.add(fmt::format("layer{}.{}", l, part));
  if (m.last) {
    m.add("final_norm");
    m.add("head");
  }
  size_t k = 0;
  if (m.first) {
    m.embedding = &m.params[k++];
    m.position = &m.params[k++];
  }
  for (int l = 0; l < layers; ++l) {
    BlockParams b;
    b.g1 = &m.params[k++];
    b.wqkv = &m.params[k++];
    b.wo = &m.params[k++];
    b.g2 = &m.params[k++];
    b.w1 = &m.params[k++];
    b.w2 = &m.params[k++];
    m.blocks.push_back(b);
  }
  if (m.last) {
    m.gf = &m.params[k++];
    m.head = &m.params[k++];
  }
}

Stage::~Stage() = default;
Stage::Stage(Stage &&) noexcept = default;
Stage &Stage::operator=(Stage &&) noexcept = default;

StageFactory stagecraft::kernels::hostStages() {
  StageFactory f;
  f.make = [](const ModelConfig &c, int index, int numStages, int firstLayer,
              int layers) -> llvm::Expected<std::unique_ptr<LayerStage>> {
    return std::make_unique<Stage>(c, index, numStages, firstLayer, layers);
  };
  f.allocate = [](size_t bytes) { return new float[(bytes + 3) / 4](); };
  f.release = [](float *p) { delete[] p; };
  f.synchronize = [] {};
  f.where = "host";
  return f;
}

void Stage::setStep(int step) { impl->step = step; }
void Stage::setDataOffset(int first) { impl->c.dataOffset = first; }

std::vector<Parameter> &Stage::parameters() { return impl->params; }

StageModel::~StageModel() = default;

void StageModel::zeroGrad() {
  for (Parameter &p : parameters())
    std::fill(p.grad.begin(), p.grad.end(), 0.0f);
}

void StageModel::step(const OptimizerConfig &o) {
  optimizerStep(parameters(), o, adamSteps);
}

Parameter stagecraft::kernels::initialParameter(const ModelConfig &c,
                                                const std::string &name) {
  const size_t H = c.hidden, F = c.ffn(), V = c.vocab, S = c.sequence;
  size_t size = 0;
  uint64_t seed = 0;
  float scale = 0.0f, constant = 0.0f;
  auto uniform = [&](size_t n, uint64_t sd, double fanIn) {
    size = n;
    seed = sd;
    scale = static_cast<float>(1.0 / std::sqrt(fanIn));
  };
  if (name == "embedding") {
    size = V * H, seed = mix(c.seed + 11), scale = 0.5f;
  } else if (name == "position") {
    size = S * H, seed = mix(c.seed + 13), scale = 0.1f;
  } else if (name == "final_norm") {
    size = H, constant = 1.0f;
  } else if (name == "head") {
    uniform(H * V, mix(c.seed + 17), static_cast<double>(H));
  } else {
    int layer = 0;
    char part[16] = {0};
    std::sscanf(name.c_str(), "layer%d.%15s", &layer, part);
    uint64_t ls = mix(c.seed + 1000 * (layer + 1));
    std::string p = part;
    if (p == "norm1" || p == "norm2")
      size = H, constant = 1.0f;
    else if (p == "wqkv")
      uniform(H * 3 * H, mix(ls + 1), static_cast<double>(H));
    else if (p == "wo")
      uniform(H * H, mix(ls + 2), static_cast<double>(H));
    else if (p == "w1")
      uniform(H * F, mix(ls + 3), static_cast<double>(H));
    else if (p == "w2")
      uniform(F * H, mix(ls + 4), static_cast<double>(F));
  }
  assert(size > 0 && "unknown parameter name");
  Parameter p;
  p.name = name;
  p.value.assign(size, constant);
  if (scale > 0)
    initUniform(p.value, seed, scale);
  p.grad.assign(size, 0.0f);
  return p;
}

void stagecraft::kernels::updateSlice(float *value, const float *grad, float *m,
                                      float *v, size_t n,
                                      const OptimizerConfig &o, int adamStep) {
  if (o.kind == OptimizerConfig::Kind::SGD) {
    for (size_t i = 0; i < n; ++i)
      value[i] -= o.lr * grad[i];
    return;
  }
  float c1 = 1.0f - std::pow(o.beta1, static_cast<float>(adamStep));
  float c2 = 1.0f - std::pow(o.beta2, static_cast<float>(adamStep));
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i];
    m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
    v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
    float mh = m[i] / c1, vh = v[i] / c2;
    value[i] -=
        o.lr * (mh / (std::sqrt(vh) + o.eps) + o.weightDecay * value[i]);
  }
}

void stagecraft::kernels::optimizerStep(std::vector<Parameter> &params,
                                        const OptimizerConfig &o,
                                        int &adamSteps) {
  const bool adam = o.kind == OptimizerConfig::Kind::AdamW;
  if (adam)
    ++adamSteps;
  for (Parameter &p : params) {
    if (adam && p.adamM.empty()) {
      p.adamM.assign(p.value.size(), 0.0f);
      p.adamV.assign(p.value.size(), 0.0f);
    }
    updateSlice(p.value.data(), p.grad.data(), p.adamM.data(), p.adamV.data(),
                p.value.size(), o, adamSteps);
  }
}

void Stage::Impl::blockForward(const ModelConfig &c, const BlockParams &w,
                               BlockStash &s, const float *in, float *out) {
  const int T = c.tokens(), H = c.hidden;
  s.qkv.resize(static_cast<size_t>(T) * 3 * H);
  parts::preForward(c, w, s.pre, in, s.qkv.data());
  s.attn.resize(static_cast<size_t>(T) * H);
  attentionForward(c.batch, c.sequence, H, c.heads, s.qkv.data(), s.attn.data(),
                   s.probs);
  parts::postForward(c, w, s.post, s.pre.x.data(), s.attn.data(), out);
}

void Stage::Impl::blockBackwardInput(const ModelConfig &c, const BlockParams &w,
                                     BlockStash &s, const float *dout,
                                     float *din) {
  const int T = c.tokens(), H = c.hidden;
  Vec dattn(static_cast<size_t>(T) * H), dqkv(static_cast<size_t>(T) * 3 * H);
  parts::postBackwardInput(c, w, s.post, dout, din, dattn.data());
  attentionBackward(c.batch, c.sequence, H, c.heads, s.qkv.data(), s.probs,
                    dattn.data(), dqkv.data());
  parts::preBackwardInput(c, w, s.pre, dqkv.data(), din);
  // What only F needed goes; W keeps its inputs and output gradients.
  Vec().swap(s.probs);
  Vec().swap(s.post.u);
  Vec().swap(s.pre.x);
  Vec().swap(s.post.x1);
}

void Stage::Impl::blockBackwardWeight(const ModelConfig &c,
                                      const BlockParams &w, BlockStash &s) {
  parts::postBackwardWeight(c, w, s.post, s.attn.data());
  parts::preBackwardWeight(c, w, s.pre);
}

void Stage::Impl::runForward(int mb, const float *input, float *output,
                             MicrobatchStash &st, Recompute mode) {
  const ModelConfig c = this->c.forMicrobatch(mb);
  const int T = c.tokens(), H = c.hidden;
  const bool full = mode == Recompute::Full;
  // Full recomputation keeps none of this; one layer's worth at a time.
  BlockStash scratch;
  parts::EmbedStash scratchEmbed;
  parts::HeadStash scratchHead;
  st.blocks.assign(full ? 0 : blocks.size(), BlockStash{});
  Vec x(static_cast<size_t>(T) * H);
  if (first)
    parts::embedForward(c, step, mb, *embedding, *position,
                        full ? scratchEmbed : st.embed, x.data());
  else
    std::copy(input, input + x.size(), x.begin());
  Vec y(x.size());
  for (size_t l = 0; l < blocks.size(); ++l) {
    BlockStash &b = full ? scratch : st.blocks[l];
    blockForward(c, blocks[l], b, x.data(), y.data());
    if (mode == Recompute::Selective)
      Vec().swap(b.probs);
    std::swap(x, y);
  }
  if (!last) {
    std::copy(x.begin(), x.end(), output);
    return;
  }
  losses[mb] = parts::headForward(c, step, mb, *gf, *head, x.data(),
                                  full ? scratchHead : st.head);
}

void Stage::forward(int mb, const float *input, float *output) {
  Impl &m = *impl;
  const ModelConfig c = m.c.forMicrobatch(mb);
  const int T = c.tokens(), H = c.hidden;
  MicrobatchStash &st = m.stash[mb];
  st = MicrobatchStash{};
  Recompute mode = recomputeOf(mb);
  if (mode == Recompute::Full && !m.first)
    st.input.assign(input, input + static_cast<size_t>(T) * H);
  m.runForward(mb, input, output, st, mode);
  m.account(mb);
}

void Stage::backwardInput(int mb, const float *outputGrad, float *inputGrad) {
  Impl &m = *impl;
  const ModelConfig c = m.c.forMicrobatch(mb);
  const int T = c.tokens(), H = c.hidden;
  MicrobatchStash &st = m.stash.at(mb);
  // Re-materialize what the forward did not keep: the same code on the same
  // inputs, so the stash is bitwise the one a plain forward keeps.
  switch (recomputeOf(mb)) {
  case Recompute::None:
    break;
  case Recompute::Full: {
    Vec input = std::move(st.input);
    Vec out(m.last ? 0 : static_cast<size_t>(T) * H);
    m.runForward(mb, m.first ? nullptr : input.data(),
                 m.last ? nullptr : out.data(), st, Recompute::None);
    m.account(mb);
    break;
  }
  case Recompute::Selective: {
    Vec out(static_cast<size_t>(T) * H);
    for (BlockStash &b : st.blocks)
      attentionForward(c.batch, c.sequence, H, c.heads, b.qkv.data(),
                       out.data(), b.probs);
    m.account(mb);
    break;
  }
  }
  Vec dx(static_cast<size_t>(T) * H);
  if (m.last) {
    parts::headBackwardInput(c, *m.gf, *m.head, st.head, dx.data());
  } else {
    std::copy(outputGrad, outputGrad + dx.size(), dx.begin());
  }
  Vec din(dx.size());
  for (size_t l = m.blocks.size(); l-- > 0;) {
    m.blockBackwardInput(c, m.blocks[l], st.blocks[l], dx.data(), din.data());
    std::swap(dx, din);
  }
  if (m.first)
    st.embed.dEmbedded = dx;
  else
    std::copy(dx.begin(), dx.end(), inputGrad);
  m.account(mb);
}

bool Stage::setMeter(ActivationMeter *meter) {
  impl->meter = meter;
  return true;
}

void Stage::backwardWeight(int mb) {
  Impl &m = *impl;
  auto it = m.stash.find(mb);
  assert(it != m.stash.end() && "W before F");
  MicrobatchStash &st = it->second;
  const ModelConfig c = m.c.forMicrobatch(mb);
  if (m.last)
    parts::headBackwardWeight(c, st.head, *m.gf, *m.head);
  for (size_t l = m.blocks.size(); l-- > 0;)
    m.blockBackwardWeight(c, m.blocks[l], st.blocks[l]);
  if (m.first)
    parts::embedBackwardWeight(c, st.embed, *m.embedding, *m.position);
  m.stash.erase(it);
  m.account(mb);
}

double Stage::loss(int mb) const {
  auto it = impl->losses.find(mb);
  return it == impl->losses.end() ? 0.0 : it->second;
}

void parts::embedForward(const ModelConfig &c, int step, int mb,
                         const Parameter &embedding, const Parameter &position,
                         EmbedStash &stash, float *x) {
  const int T = c.tokens(), H = c.hidden;
  stash.tokens.resize(T);
  for (int t = 0; t < T; ++t) {
    int tok = syntheticToken(c, step, mb, t);
    stash.tokens[t] = tok;
    int pos = t % c.sequence;
    for (int h = 0; h < H; ++h)
      x[static_cast<size_t>(t) * H + h] =
          embedding.value[static_cast<size_t>(tok) * H + h] +
          position.value[static_cast<size_t>(pos) * H + h];
  }
}

void parts::embedBackwardWeight(const ModelConfig &c, const EmbedStash &stash,
                                Parameter &embedding, Parameter &position) {
  const int T = c.tokens(), H = c.hidden;
  for (int t = 0; t < T; ++t) {
    int pos = t % c.sequence;
    for (int h = 0; h < H; ++h) {
      float g = stash.dEmbedded[static_cast<size_t>(t) * H + h];
      embedding.grad[static_cast<size_t>(stash.tokens[t]) * H + h] += g;
      position.grad[static_cast<size_t>(pos) * H + h] += g;
    }
  }
}

double parts::headForward(const ModelConfig &c, int step, int mb,
                          const Parameter &gf, const Parameter &head,
                          const float *x, HeadStash &stash) {
  using namespace ops;
  const int T = c.tokens(), H = c.hidden, V = c.vocab;
  stash.xhatf.resize(static_cast<size_t>(T) * H);
  stash.invf.resize(T);
  stash.hf.resize(static_cast<size_t>(T) * H);
  rmsForward(T, H, x, gf.value.data(), stash.hf.data(), stash.xhatf.data(),
             stash.invf.data());
  Vec logits(static_cast<size_t>(T) * V);
  gemm(false, false, T, V, H, stash.hf.data(), head.value.data(), logits.data(),
       false);
  // Cross-entropy, mean over tokens; the step's loss is the mean over
  // microbatches, so each microbatch's gradient carries 1 / (T x m).
  stash.dlogits.resize(logits.size());
  double loss = 0;
  const float norm = 1.0f / (static_cast<float>(T) * c.microbatches);
  for (int t = 0; t < T; ++t) {
    float *row = &logits[static_cast<size_t>(t) * V];
    float mx = *std::max_element(row, row + V);
    double sum = 0;
    for (int v = 0; v < V; ++v)
      sum += std::exp(static_cast<double>(row[v] - mx));
    int target = syntheticTarget(c, step, mb, t);
    loss += std::log(sum) + mx - row[target];
    for (int v = 0; v < V; ++v) {
      float p = static_cast<float>(std::exp(row[v] - mx) / sum);
      stash.dlogits[static_cast<size_t>(t) * V + v] =
          (p - (v == target ? 1.0f : 0.0f)) * norm;
    }
  }
  return loss / T;
}

void parts::headBackwardInput(const ModelConfig &c, const Parameter &gf,
                              const Parameter &head, HeadStash &stash,
                              float *dx) {
  using namespace ops;
  const int T = c.tokens(), H = c.hidden, V = c.vocab;
  stash.dhf.resize(static_cast<size_t>(T) * H);
  gemm(false, true, T, H, V, stash.dlogits.data(), head.value.data(),
       stash.dhf.data(), false);
  rmsBackwardInput(T, H, stash.dhf.data(), gf.value.data(), stash.xhatf.data(),
                   stash.invf.data(), dx, false);
}

void parts::headBackwardWeight(const ModelConfig &c, const HeadStash &stash,
                               Parameter &gf, Parameter &head) {
  using namespace ops;
  const int T = c.tokens(), H = c.hidden, V = c.vocab;
  gemm(true, false, H, V, T, stash.hf.data(), stash.dlogits.data(),
       head.grad.data(), true);
  rmsBackwardWeight(T, H, stash.dhf.data(), stash.xhatf.data(), gf.grad.data());
}

void parts::preForward(const ModelConfig &c, const LayerParams &w, PreStash &s,
                       const float *x, float *qkv) {
  const int T = c.tokens(), H = c.hidden;
  s.x.assign(x, x + static_cast<size_t>(T) * H);
  s.xhat1.resize(s.x.size());
  s.inv1.resize(T);
  s.h1.resize(s.x.size());
  rmsForward(T, H, s.x.data(), w.g1->value.data(), s.h1.data(), s.xhat1.data(),
             s.inv1.data());
  gemm(false, false, T, 3 * H, H, s.h1.data(), w.wqkv->value.data(), qkv,
       false);
}

void parts::preBackwardInput(const ModelConfig &c, const LayerParams &w,
                             PreStash &s, const float *dqkv, float *dx) {
  const int T = c.tokens(), H = c.hidden;
  s.dqkv.assign(dqkv, dqkv + static_cast<size_t>(T) * 3 * H);
  s.dh1.resize(static_cast<size_t>(T) * H);
  gemm(false, true, T, H, 3 * H, s.dqkv.data(), w.wqkv->value.data(),
       s.dh1.data(), false);
  rmsBackwardInput(T, H, s.dh1.data(), w.g1->value.data(), s.xhat1.data(),
                   s.inv1.data(), dx, true);
}

void parts::preBackwardWeight(const ModelConfig &c, const LayerParams &w,
                              const PreStash &s) {
  const int T = c.tokens(), H = c.hidden;
  gemm(true, false, H, 3 * H, T, s.h1.data(), s.dqkv.data(),
       w.wqkv->grad.data(), true);
  rmsBackwardWeight(T, H, s.dh1.data(), s.xhat1.data(), w.g1->grad.data());
}

void parts::postForward(const ModelConfig &c, const LayerParams &w,
                        PostStash &s, const float *residual, const float *attn,
                        float *out) {
  const int T = c.tokens(), H = c.hidden, F = c.ffn();
  const size_t n = static_cast<size_t>(T) * H;
  s.x1.assign(residual, residual + n);
  gemm(false, false, T, H, H, attn, w.wo->value.data(), s.x1.data(), true);
  s.xhat2.resize(n);
  s.inv2.resize(T);
  s.h2.resize(n);
  rmsForward(T, H, s.x1.data(), w.g2->value.data(), s.h2.data(), s.xhat2.data(),
             s.inv2.data());
  s.u.resize(static_cast<size_t>(T) * F);
  gemm(false, false, T, F, H, s.h2.data(), w.w1->value.data(), s.u.data(),
       false);
  s.act.resize(s.u.size());
  for (size_t i = 0; i < s.u.size(); ++i)
    s.act[i] = gelu(s.u[i]);
  std::copy(s.x1.begin(), s.x1.end(), out);
  gemm(false, false, T, H, F, s.act.data(), w.w2->value.data(), out, true);
}

void parts::postBackwardInput(const ModelConfig &c, const LayerParams &w,
                              PostStash &s, const float *dout, float *dResidual,
                              float *dAttn) {
  const int T = c.tokens(), H = c.hidden, F = c.ffn();
  // MLP: out = x1 + gelu(h2 W1) W2.
  s.dy2.assign(dout, dout + static_cast<size_t>(T) * H);
  Vec dact(static_cast<size_t>(T) * F);
  gemm(false, true, T, F, H, s.dy2.data(), w.w2->value.data(), dact.data(),
       false);
  s.du.resize(dact.size());
  for (size_t i = 0; i < dact.size(); ++i)
    s.du[i] = dact[i] * geluGrad(s.u[i]);
  s.dh2.resize(s.dy2.size());
  gemm(false, true, T, H, F, s.du.data(), w.w1->value.data(), s.dh2.data(),
       false);
  s.dy1 = s.dy2;
  rmsBackwardInput(T, H, s.dh2.data(), w.g2->value.data(), s.xhat2.data(),
                   s.inv2.data(), s.dy1.data(), true);
  // x1 = residual + attn Wo.
  std::copy(s.dy1.begin(), s.dy1.end(), dResidual);
  gemm(false, true, T, H, H, s.dy1.data(), w.wo->value.data(), dAttn, false);
}

void parts::postBackwardWeight(const ModelConfig &c, const LayerParams &w,
                               const PostStash &s, const float *attn) {
  const int T = c.tokens(), H = c.hidden, F = c.ffn();
  gemm(true, false, F, H, T, s.act.data(), s.dy2.data(), w.w2->grad.data(),
       true);
  gemm(true, false, H, F, T, s.h2.data(), s.du.data(), w.w1->grad.data(), true);
  rmsBackwardWeight(T, H, s.dh2.data(), s.xhat2.data(), w.g2->grad.data());
  gemm(true, false, H, H, T, attn, s.dy1.data(), w.wo->grad.data(), true);
}
