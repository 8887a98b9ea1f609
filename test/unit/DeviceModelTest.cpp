//===- DeviceModelTest.cpp - The device model against the reference ------===//
//
// The device model (kernels/device/DeviceStage.h: the code the CUDA backend
// trains with) run on the host device, against the reference stages: the
// same losses, gradients and, after AdamW steps, weights, with W deferred
// as zero-bubble schedules do, on shapes that exercise the strided batched
// attention GEMMs (several sequences and heads, odd lengths). The host
// device also checks every GEMM operand and copy against live allocations,
// and fills fresh memory with NaN, so an overrun or a read of unwritten
// memory fails here rather than silently on a GPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/Model.h"
#include "kernels/device/DeviceStage.h"
#include "kernels/device/HostDevice.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace stagecraft::kernels;
using device::DeviceStage;
using device::HostDevice;

namespace {

using HostStage = DeviceStage<HostDevice>;

ModelConfig shape(int batch, int sequence, int heads) {
  ModelConfig c;
  c.hidden = 12;
  c.heads = heads;
  c.sequence = sequence;
  c.vocab = 13;
  c.batch = batch;
  c.microbatches = 3;
  c.seed = 5;
  return c;
}

template <class S>
std::vector<std::unique_ptr<LayerStage>> split(const ModelConfig &c,
                                               const std::vector<int> &layers) {
  std::vector<std::unique_ptr<LayerStage>> stages;
  int first = 0;
  for (size_t s = 0; s < layers.size(); ++s) {
    int n = static_cast<int>(layers.size());
    if constexpr (std::is_same_v<S, Stage>)
      stages.push_back(
          std::make_unique<Stage>(c, static_cast<int>(s), n, first, layers[s]));
    else
      stages.push_back(std::make_unique<HostStage>(
          std::make_unique<HostDevice>(), c, static_cast<int>(s), n, first,
          layers[s]));
    first += layers[s];
  }
  return stages;
}

/// One step: every microbatch's F through the stages, then their I back in
/// reverse order, then every W (deferred, last microbatch first). Messages
/// live in \p messages, one buffer per (stage, microbatch, direction).
double runStep(std::vector<std::unique_ptr<LayerStage>> &stages,
               const ModelConfig &c, int step) {
  const size_t n = stages.size(), m = c.microbatches;
  const size_t floats = static_cast<size_t>(c.tokens()) * c.hidden;
  std::vector<std::vector<float>> act(n * m, std::vector<float>(floats)),
      grad(n * m, std::vector<float>(floats));
  for (auto &s : stages)
    if (auto *d = dynamic_cast<HostStage *>(s.get()))
      for (size_t k = 0; k < n * m; ++k) {
        d->device().adopt(act[k].data(), floats * 4);
        d->device().adopt(grad[k].data(), floats * 4);
      }
  for (auto &s : stages) {
    s->setStep(step);
    s->zeroGrad();
  }
  for (size_t mb = 0; mb < m; ++mb)
    for (size_t s = 0; s < n; ++s)
      stages[s]->forward(static_cast<int>(mb),
                         s ? act[(s - 1) * m + mb].data() : nullptr,
                         act[s * m + mb].data());
  double loss = 0;
  for (size_t mb = 0; mb < m; ++mb)
    loss += stages.back()->loss(static_cast<int>(mb)) / m;
  for (size_t mb = 0; mb < m; ++mb)
    for (size_t s = n; s-- > 0;)
      stages[s]->backwardInput(static_cast<int>(mb),
                               s + 1 < n ? grad[(s + 1) * m + mb].data()
                                         : nullptr,
                               grad[s * m + mb].data());
  for (size_t mb = m; mb-- > 0;)
    for (size_t s = 0; s < n; ++s)
      stages[s]->backwardWeight(static_cast<int>(mb));
  return loss;
}

/// Every parameter of \p stages, by name, value or gradient.
std::map<std::string, std::vector<float>>
collect(std::vector<std::unique_ptr<LayerStage>> &stages, bool gradients) {
  std::map<std::string, std::vector<float>> all;
  for (auto &s : stages)
    for (Parameter &p : s->parameters())
      all[p.name] = gradients ? p.grad : p.value;
  return all;
}

/// The largest relative L2 error of \p a against \p b over the parameters.
double worstError(const std::map<std::string, std::vector<float>> &a,
                  const std::map<std::string, std::vector<float>> &b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto &[name, x] : a) {
    const std::vector<float> &y = b.at(name);
    EXPECT_EQ(x.size(), y.size()) << name;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_FALSE(std::isnan(x[i])) << name << "[" << i << "]";
      diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      norm += double(y[i]) * y[i];
    }
    double e = std::sqrt(diff) / (std::sqrt(norm) > 0 ? std::sqrt(norm) : 1.0);
    EXPECT_LE(e, 1e-5) << name;
    worst = std::max(worst, e);
  }
  return worst;
}

void expectHealthy(std::vector<std::unique_ptr<LayerStage>> &stages) {
  for (auto &s : stages) {
    llvm::Error err = s->status();
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  }
}

} // namespace

TEST(DeviceModel, OneStepMatchesTheReference) {
  for (ModelConfig c :
       {shape(1, 4, 1), shape(2, 5, 2), shape(3, 7, 3), shape(2, 9, 4)}) {
    auto ref = split<Stage>(c, {3});
    auto dev = split<HostStage>(c, {1, 2});
    double a = runStep(ref, c, 0), b = runStep(dev, c, 0);
    expectHealthy(dev);
    EXPECT_NEAR(a, b, 1e-6 * std::fabs(a)) << "batch " << c.batch;
    EXPECT_GT(a, 0.0);
    worstError(collect(dev, true), collect(ref, true));
    // Everything a microbatch kept is released after its W: only the
    // parameters, their gradients and the last stage's per-token losses
    // (one buffer per microbatch) stay.
    for (auto &s : dev) {
      auto &d = static_cast<HostStage &>(*s);
      size_t losses = s == dev.back() ? c.microbatches : 0;
      EXPECT_EQ(d.device().liveAllocations(),
                2 * d.parameters().size() + losses);
      EXPECT_GT(d.device().gemms, 0u);
    }
  }
}

TEST(DeviceModel, WeightsMatchAfterAdamWAndSgdSteps) {
  for (auto kind : {OptimizerConfig::Kind::AdamW, OptimizerConfig::Kind::SGD}) {
    ModelConfig c = shape(2, 6, 3);
    OptimizerConfig o;
    o.kind = kind;
    o.lr = 0.01f;
    auto ref = split<Stage>(c, {1, 1, 1});
    auto dev = split<HostStage>(c, {2, 1});
    std::vector<double> la, lb;
    for (int step = 0; step < 3; ++step) {
      la.push_back(runStep(ref, c, step));
      lb.push_back(runStep(dev, c, step));
      for (auto &s : ref)
        s->step(o);
      for (auto &s : dev)
        s->step(o);
    }
    expectHealthy(dev);
    for (int step = 0; step < 3; ++step)
      EXPECT_NEAR(la[step], lb[step], 1e-5 * la[step]);
    EXPECT_LT(lb.back(), lb.front());
    worstError(collect(dev, false), collect(ref, false));
  }
}

TEST(DeviceModel, HostDeviceCatchesOverrunsAndBadLeadingDimensions) {
  HostDevice d;
  float *a = static_cast<float *>(d.allocate(6 * 4));
  float *c = static_cast<float *>(d.allocate(4 * 4));
  // A is 2 x 3 (lda 2), B = A^T would need 3 x 2: 6 floats, fine; C 2 x 2.
  d.gemm(false, true, 2, 2, 3, a, 2, 0, a, 2, 0, 0.0f, c, 2, 0, 1);
  EXPECT_EQ(d.error(), "");
  // The same GEMM batched twice reads past A.
  d.gemm(false, true, 2, 2, 3, a, 2, 6, a, 2, 6, 0.0f, c, 2, 0, 2);
  EXPECT_NE(d.error().find("gemm A"), std::string::npos) << d.error();
  HostDevice e;
  float *x = static_cast<float *>(e.allocate(8 * 4));
  e.gemm(false, false, 4, 2, 2, x, 3, 0, x, 2, 0, 0.0f, x, 4, 0, 1);
  EXPECT_NE(e.error().find("invalid arguments"), std::string::npos);
  HostDevice f;
  void *y = f.allocate(16);
  f.release(y, 16);
  f.zero(y, 16);
  EXPECT_NE(f.error().find("outside every live allocation"), std::string::npos);
}

TEST(DeviceModel, CallsOutOfOrderAreReportedNotRun) {
  ModelConfig c = shape(1, 4, 1);
  HostStage s(std::make_unique<HostDevice>(), c, 0, 1, 0, 1);
  s.backwardWeight(0);
  llvm::Error err = s.status();
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "backward weight of microbatch 0 before its backward input");
  HostStage t(std::make_unique<HostDevice>(), c, 0, 1, 0, 1);
  t.backwardInput(2, nullptr, nullptr);
  err = t.status();
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "backward input of microbatch 2 before its forward");
}
