//===- ModelTest.cpp - The reference transformer --------------------------===//
//
// Gradients against finite differences for every kind of parameter, the
// split of a model into stages changing nothing, W deferred past other
// microbatches changing nothing, and the loss going down under SGD and AdamW.
//
//===----------------------------------------------------------------------===//

#include "kernels/Model.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace stagecraft::kernels;

namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.hidden = 8;
  c.heads = 2;
  c.sequence = 5;
  c.vocab = 11;
  c.batch = 2;
  c.microbatches = 2;
  c.seed = 7;
  return c;
}

/// Runs stages front to back for every microbatch: F, then I and W.
double runStep(std::vector<Stage> &stages, const ModelConfig &c) {
  double loss = 0;
  std::vector<float> a(c.tokens() * c.hidden), b(a.size());
  for (int mb = 0; mb < c.microbatches; ++mb) {
    for (size_t s = 0; s < stages.size(); ++s) {
      stages[s].forward(mb, s ? a.data() : nullptr, b.data());
      std::swap(a, b);
    }
    loss += stages.back().loss(mb) / c.microbatches;
    for (size_t s = stages.size(); s-- > 0;) {
      stages[s].backwardInput(mb, s + 1 < stages.size() ? a.data() : nullptr,
                              b.data());
      stages[s].backwardWeight(mb);
      std::swap(a, b);
    }
  }
  return loss;
}

std::vector<Stage> split(const ModelConfig &c, std::vector<int> layers) {
  std::vector<Stage> stages;
  int first = 0;
  for (size_t s = 0; s < layers.size(); ++s) {
    stages.emplace_back(c, static_cast<int>(s), static_cast<int>(layers.size()),
                        first, layers[s]);
    first += layers[s];
  }
  return stages;
}

TEST(Model, GradientsMatchFiniteDifferences) {
  ModelConfig c = tiny();
  std::vector<Stage> stages = split(c, {1, 1});
  runStep(stages, c);
  int checked = 0;
  for (Stage &stage : stages)
    for (Parameter &p : stage.parameters()) {
      // A few entries of every parameter.
      for (size_t i = 0; i < p.value.size(); i += p.value.size() / 3 + 1) {
        float analytic = p.grad[i];
        float saved = p.value[i];
        const float h = 1e-2f;
        auto lossAt = [&](float v) {
          p.value[i] = v;
          for (Stage &s : stages)
            s.zeroGrad();
          return runStep(stages, c);
        };
        double numeric = (lossAt(saved + h) - lossAt(saved - h)) / (2 * h);
        p.value[i] = saved;
        EXPECT_NEAR(analytic, numeric, 2e-3 + 3e-2 * std::fabs(numeric))
            << p.name << "[" << i << "]";
        ++checked;
      }
    }
  EXPECT_GT(checked, 20);
}

TEST(Model, SplitIntoStagesComputesTheSameModel) {
  ModelConfig c = tiny();
  std::vector<Stage> whole = split(c, {3});
  std::vector<Stage> parts = split(c, {1, 2});
  double a = runStep(whole, c), b = runStep(parts, c);
  EXPECT_EQ(a, b);
  // Same parameters in the same order, same gradients to the bit.
  std::vector<float> ga, gb;
  for (Stage &s : whole)
    for (Parameter &p : s.parameters())
      ga.insert(ga.end(), p.grad.begin(), p.grad.end());
  for (Stage &s : parts)
    for (Parameter &p : s.parameters())
      gb.insert(gb.end(), p.grad.begin(), p.grad.end());
  EXPECT_EQ(ga, gb);
}

TEST(Model, DeferredWeightGradientsChangeNothing) {
  ModelConfig c = tiny();
  std::vector<Stage> eager = split(c, {2});
  runStep(eager, c);
  std::vector<Stage> lazy = split(c, {2});
  std::vector<float> out(c.tokens() * c.hidden), din(out.size());
  for (int mb = 0; mb < c.microbatches; ++mb) {
    lazy[0].forward(mb, nullptr, out.data());
    lazy[0].backwardInput(mb, nullptr, din.data());
  }
  for (int mb = c.microbatches; mb-- > 0;)
    lazy[0].backwardWeight(mb);
  for (size_t k = 0; k < eager[0].parameters().size(); ++k) {
    const std::vector<float> &a = eager[0].parameters()[k].grad;
    const std::vector<float> &b = lazy[0].parameters()[k].grad;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-6f + 1e-5f * std::fabs(a[i]));
  }
}

TEST(Model, LossGoesDownUnderSgdAndAdamW) {
  for (auto kind : {OptimizerConfig::Kind::SGD, OptimizerConfig::Kind::AdamW}) {
    ModelConfig c = tiny();
    std::vector<Stage> stages = split(c, {1, 1});
    OptimizerConfig o;
    o.kind = kind;
    o.lr = kind == OptimizerConfig::Kind::SGD ? 0.5f : 0.01f;
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      for (Stage &s : stages) {
        s.setStep(step);
        s.zeroGrad();
      }
      last = runStep(stages, c);
      if (step == 0)
        first = last;
      for (Stage &s : stages)
        s.step(o);
    }
    EXPECT_LT(last, 0.8 * first);
  }
}

TEST(Model, RejectsBadSizes) {
  ModelConfig c = tiny();
  c.heads = 3;
  EXPECT_EQ(llvm::toString(c.validate()),
            "hidden (8) must be a positive multiple of heads (3)");
}

} // namespace

#include "kernels/HelixModel.h"

#include <map>

namespace {

TEST(HelixModel, CutAtAttentionComputesTheSameModel) {
  for (bool recompute : {false, true}) {
    ModelConfig c = tiny();
    const int L = 3;
    std::vector<Stage> whole = split(c, {L});
    double reference = runStep(whole, c);

    std::vector<HelixBlock> blocks;
    for (int j = 0; j <= L; ++j)
      blocks.emplace_back(c, j, L, [recompute](int) { return recompute; });
    std::vector<HelixAttention> attention(L, HelixAttention(c));
    const size_t n = static_cast<size_t>(c.tokens()) * c.hidden;
    double loss = 0;
    for (int mb = 0; mb < c.microbatches; ++mb) {
      std::vector<std::vector<float>> x(L + 1, std::vector<float>(n)),
          qkv(L, std::vector<float>(3 * n)), att(L, std::vector<float>(n));
      for (int j = 0; j <= L; ++j) {
        blocks[j].forward(
            mb, j ? x[j - 1].data() : nullptr, j ? att[j - 1].data() : nullptr,
            j < L ? x[j].data() : nullptr, j < L ? qkv[j].data() : nullptr);
        if (j < L)
          attention[j].forward(mb, qkv[j].data(), att[j].data());
      }
      loss += blocks[L].loss(mb) / c.microbatches;
      std::vector<std::vector<float>> dx(L + 1, std::vector<float>(n)),
          datt(L, std::vector<float>(n)), dqkv(L, std::vector<float>(3 * n));
      for (int j = L; j >= 0; --j) {
        if (j < L)
          attention[j].backward(mb, datt[j].data(), dqkv[j].data());
        blocks[j].backwardInput(mb, j < L ? dx[j].data() : nullptr,
                                j < L ? dqkv[j].data() : nullptr,
                                j ? dx[j - 1].data() : nullptr,
                                j ? datt[j - 1].data() : nullptr);
        blocks[j].backwardWeight(mb);
      }
    }
    EXPECT_NEAR(loss, reference, 1e-12);
    std::map<std::string, const std::vector<float> *> byName;
    for (Stage &s : whole)
      for (Parameter &p : s.parameters())
        byName[p.name] = &p.grad;
    size_t matched = 0;
    for (HelixBlock &b : blocks)
      for (Parameter &p : b.parameters()) {
        ASSERT_TRUE(byName.count(p.name)) << p.name;
        const std::vector<float> &ref = *byName[p.name];
        ASSERT_EQ(ref.size(), p.grad.size());
        for (size_t i = 0; i < ref.size(); ++i)
          EXPECT_NEAR(p.grad[i], ref[i], 1e-6f + 1e-5f * std::fabs(ref[i]))
              << p.name << "[" << i << "]";
        ++matched;
      }
    EXPECT_EQ(matched, byName.size());
  }
}

} // namespace
