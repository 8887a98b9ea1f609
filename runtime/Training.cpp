//===- Training.cpp - The training side of a rank's run -------------------===//
//
// See Executor.h: building a rank's stages and checking its buffers, running
// one layer compute of a plan op on them, the training step loop
// (optimizer, checkpoints, dumps, injected failures and slowdowns), the
// stage graph that gathers inputs and output gradients, and the straggler
// test. The executor (Executor.cpp) calls these from its instruction loop.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"

#include "kernels/device/HostDevice.h"
#include "runtime/Checkpoint.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

using namespace stagecraft::runtime;
using namespace stagecraft::pipe;
namespace kernels = stagecraft::kernels;

int64_t
stagecraft::runtime::trainingMessageBytes(const kernels::ModelConfig &model) {
  return 3 * model.messageBytes() + 2 * kTrainingPayloadOffset;
}

llvm::Expected<RankModels>
stagecraft::runtime::buildStages(const sched::Plan &plan, int rank,
                                 const TrainOptions &train,
                                 const kernels::StageFactory &where) {
  if (llvm::Error err = train.model.validate())
    return std::move(err);
  // Ranks are threads or processes already; BLAS threads would only contend.
  openblas_set_num_threads(1);
  RankModels models;
  const int n = static_cast<int>(plan.stageNames.size());
  bool helix = std::find(plan.stageAttention.begin(), plan.stageAttention.end(),
                         true) != plan.stageAttention.end();
  if (helix) {
    // Block j of L + 1 blocks, an attention after every block but the last.
    if (where.where != "host")
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("training a helix plan runs on the host only (local or "
                      "mpi), not on {}",
                      where.where));
    for (int s = 0; s + 1 < n; ++s)
      if (!plan.stageAttention[s])
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            fmt::format("training a helix plan needs attention after every "
                        "stage but the last; @{} has none",
                        plan.stageNames[s]));
    for (int s = 0; s < n; ++s)
      if (rank < 0 || plan.placement[s] == rank) {
        sched::RecomputeTable table = plan.recompute;
        auto block = std::make_unique<kernels::HelixBlock>(
            train.model, s, n - 1, [table, s](int mb) {
              return table.at(s, mb) != sched::Recompute::None;
            });
        models.blocks[s] = block.get();
        models.all.emplace_back(s, std::move(block));
      }
    return models;
  }
  int first = 0;
  models.metered = true;
  models.batch = train.model.batch;
  models.hidden = train.model.hidden;
  // A branching model: each stage its own shape, branch and layers.
  if (!plan.stageInputs.empty())
    models.graph = stageGraph(plan, train.model.sequence);
  const StageGraph &g = models.graph;
  for (int s = 0; s < n; ++s) {
    int layers =
        s < static_cast<int>(plan.stageLayers.size()) ? plan.stageLayers[s] : 0;
    if (layers < 1)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("stage @{} has no layers(N); training needs the layer "
                      "count of every stage",
                      plan.stageNames[s]));
    if (rank < 0 || plan.placement[s] == rank) {
      kernels::ModelConfig c = train.model;
      // The factory's roles: index 0 embeds, index count - 1 has the loss.
      int index = s, count = n, firstLayer = first;
      if (!g.empty()) {
        c.sequence = g.sequence[s];
        c.seed = train.model.seed + 7919 * static_cast<uint64_t>(g.branch[s]);
        c.prefix = fmt::format("b{}.", g.branch[s]);
        index = g.inputs[s].empty() ? 0 : 1;
        count = s == n - 1 ? index + 1 : 3;
        firstLayer = g.firstLayer[s];
      }
      llvm::Expected<std::unique_ptr<kernels::LayerStage>> stage =
          where.make(c, index, count, firstLayer, layers);
      if (!stage)
        return stage.takeError();
      std::vector<kernels::Recompute> recompute(plan.microbatches);
      for (int m = 0; m < plan.microbatches; ++m)
        recompute[m] = static_cast<kernels::Recompute>(plan.recompute.at(s, m));
      (*stage)->setRecompute(std::move(recompute));
      models.metered &= (*stage)->setMeter(models.meter.get());
      models.stages[s] = stage->get();
      models.all.emplace_back(s, std::move(*stage));
    }
    first += layers;
  }
  return models;
}

/// Writes each parameter (or its gradient) of \p model to \p dir, one file
/// per parameter name, so that any split of the model compares with any.
static llvm::Error dumpStage(kernels::StageModel &model, const std::string &dir,
                             bool gradients) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "cannot create " + dir);
  for (kernels::Parameter &p : model.parameters()) {
    std::string path =
        fmt::format("{}/{}.{}.bin", dir, p.name, gradients ? "grad" : "value");
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return llvm::createStringError(ec, "cannot write " + path);
    const std::vector<float> &v = gradients ? p.grad : p.value;
    os.write(reinterpret_cast<const char *>(v.data()), v.size() * 4);
  }
  return llvm::Error::success();
}

/// Steps in a row whose update a non-finite gradient skipped before the
/// run stops as diverged.
static constexpr int kMaxSkippedSteps = 3;

llvm::Error stagecraft::runtime::trainSteps(
    const sched::Plan &plan, RankModels &models, const TrainOptions &train,
    llvm::function_ref<llvm::Error()> pass, std::vector<double> &losses,
    const TrainHooks &hooks) {
  const int last = static_cast<int>(plan.stageNames.size()) - 1;
  kernels::StageModel *lastStage = nullptr;
  for (auto &[index, model] : models.all)
    if (index == last)
      lastStage = model.get();
  std::vector<std::pair<int, kernels::StageModel *>> pieces;
  for (auto &[index, model] : models.all)
    pieces.push_back({index, model.get()});
  CheckpointModel expected;
  expected.model = train.model;
  expected.optimizer = train.optimizer.kind;
  for (int l : plan.stageLayers)
    expected.layers += l;
  int first = 0;
  if (train.resume) {
    auto loadStart = std::chrono::steady_clock::now();
    llvm::Expected<Checkpoint> c =
        loadCheckpoint(train.checkpointDir, expected);
    if (!c)
      return c.takeError();
    if (hooks.rank == 0)
      for (const std::string &why : c->skipped)
        llvm::errs() << "stagecraft-run: warning: skipped a checkpoint: " << why
                     << "\n";
    if (c->step >= train.steps)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("--resume: the checkpoint {} is at step {}, and "
                      "--steps={} asks for no more (--steps is the total)",
                      c->path, c->step, train.steps));
    if (llvm::Error err = restoreCheckpoint(*c, pieces))
      return err;
    first = c->step;
    // The loss log goes on from the checkpoint's (the last stage's rank
    // reports it; the others' zeros add nothing).
    if (lastStage)
      losses = c->losses;
    losses.resize(first, 0.0);
    if (hooks.resumeSeconds)
      *hooks.resumeSeconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - loadStart)
                                 .count();
  }
  if (hooks.startStep >= 0) {
    first = hooks.startStep;
    losses.assign(first, 0.0);
  }
  if (hooks.firstStep)
    *hooks.firstStep = first;
  // A straggler stops the run at the checkpoint (every rank is told in the
  // barrier, so all stop after the same step).
  bool stop = false;
  auto writeCheckpoint = [&](int done) -> llvm::Error {
    if (hooks.writes && !hooks.writes())
      return llvm::Error::success();
    if (llvm::Error err = writeCheckpointPart(train.checkpointDir, done,
                                              hooks.rank, pieces, losses))
      return err;
    if (hooks.atCheckpoint)
      if (llvm::Error err = hooks.atCheckpoint(done))
        return err;
    if (hooks.barrier) {
      llvm::Expected<bool> halt = hooks.barrier(done);
      if (!halt)
        return halt.takeError();
      // The last step's checkpoint ends the run anyway.
      stop = *halt && done < train.steps;
    }
    if (hooks.rank != 0)
      return llvm::Error::success();
    return finishCheckpoint(train.checkpointDir, done, hooks.ranks, expected);
  };
  auto checkpoint = [&](int done) -> llvm::Error {
    if (train.checkpointDir.empty() || train.checkpointEvery <= 0 ||
        (done % train.checkpointEvery != 0 && done != train.steps))
      return llvm::Error::success();
    // Sharded: every replica gathers the whole state, one writes it.
    if (hooks.materialize) {
      if (llvm::Error err = hooks.materialize(true))
        return err;
      llvm::Error err = writeCheckpoint(done);
      if (llvm::Error back = hooks.materialize(false))
        return llvm::joinErrors(std::move(err), std::move(back));
      return err;
    }
    return writeCheckpoint(done);
  };
  auto dumpAll = [&](const std::string &dir, bool gradients) -> llvm::Error {
    if (dir.empty())
      return llvm::Error::success();
    if (hooks.materialize)
      if (llvm::Error err = hooks.materialize(true))
        return err;
    if (!hooks.writes || hooks.writes())
      for (auto &[index, model] : models.all)
        if (llvm::Error err = dumpStage(*model, dir, gradients))
          return err;
    if (hooks.materialize)
      return hooks.materialize(false);
    return llvm::Error::success();
  };
  // The global checks of a step's gradients. This rank's part: the sum of
  // squares of its finite gradient elements, how many are not finite, and
  // the first stage holding one.
  auto localChecks = [&] {
    double sumsq = 0.0, bad = 0.0, badStage = -1.0;
    for (auto &[index, model] : models.all)
      for (const kernels::Parameter &param : model->parameters())
        for (float g : param.grad) {
          if (std::isfinite(g)) {
            sumsq += static_cast<double>(g) * g;
            continue;
          }
          if (bad == 0.0)
            badStage = index;
          bad += 1.0;
        }
    return std::vector<double>{sumsq, bad, badStage};
  };
  // Every rank sums the parts in rank order, so all reach the same verdict
  // bit for bit, with overlap or without.
  struct Verdict {
    bool skip = false;
    double coef = 1.0, norm = 0.0;
    int badStage = -1;
    bool changesTheUpdate() const { return skip || coef != 1.0; }
  };
  auto verdictOf = [&](const std::vector<double> &all) {
    Verdict v;
    double sumsq = 0.0;
    for (size_t i = 0; i + 2 < all.size(); i += 3) {
      sumsq += all[i];
      if (all[i + 1] > 0.0 && !v.skip) {
        v.skip = true;
        v.badStage = static_cast<int>(all[i + 2]);
      }
    }
    v.norm = std::sqrt(sumsq);
    if (!v.skip && train.clipGradNorm > 0.0 && v.norm > train.clipGradNorm)
      v.coef = train.clipGradNorm / (v.norm + 1e-6);
    return v;
  };
  const bool holdsEveryStage = models.all.size() == plan.stageNames.size();
  const bool globalChecks =
      static_cast<bool>(hooks.postChecks) || holdsEveryStage;
  auto exchange = [&](int step, const std::vector<double> &mine)
      -> llvm::Expected<std::vector<double>> {
    if (!hooks.postChecks)
      return mine;
    if (llvm::Error err = hooks.postChecks(step, mine))
      return std::move(err);
    return hooks.finishChecks(step);
  };
  // The update as the checks allow: none for a non-finite gradient, the
  // gradients scaled by the clipping coefficient first.
  auto apply = [&](const Verdict &v) {
    if (v.skip)
      return;
    const float coef = static_cast<float>(v.coef);
    for (auto &[index, model] : models.all) {
      if (v.coef != 1.0)
        for (kernels::Parameter &param : model->parameters())
          for (float &g : param.grad)
            g *= coef;
      if (hooks.update)
        hooks.update(*model, index);
      else
        model->step(train.optimizer);
    }
  };
  int skippedInARow = 0;
  auto note = [&](const Verdict &v, int step) -> llvm::Error {
    if (!v.skip) {
      skippedInARow = 0;
      return llvm::Error::success();
    }
    if (hooks.skippedSteps)
      ++*hooks.skippedSteps;
    const std::string stage =
        v.badStage >= 0 && v.badStage < static_cast<int>(plan.stageNames.size())
            ? plan.stageNames[v.badStage]
            : "?";
    if (++skippedInARow >= kMaxSkippedSteps)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("training diverged: step {}: stage @{}: a gradient is "
                      "not finite in {} steps in a row",
                      step, stage, kMaxSkippedSteps));
    if (hooks.rank == 0)
      llvm::errs() << fmt::format(
          "stagecraft-run: warning: step {}: a gradient of stage @{} is not "
          "finite; no rank applies the step's update\n",
          step, stage);
    return llvm::Error::success();
  };
  // --overlap-steps: the step whose update was applied before its checks
  // came back, and what it changed.
  int pending = -1;
  std::vector<std::vector<kernels::Parameter>> saved;
  std::vector<int> savedAdamSteps;
  auto save = [&] {
    saved.clear();
    savedAdamSteps.clear();
    for (auto &[index, model] : models.all) {
      saved.push_back(model->parameters());
      savedAdamSteps.push_back(model->optimizerSteps());
    }
  };
  auto restore = [&] {
    for (size_t i = 0; i < models.all.size(); ++i) {
      kernels::StageModel &model = *models.all[i].second;
      std::vector<kernels::Parameter> &params = model.parameters();
      for (size_t k = 0; k < params.size(); ++k)
        params[k] = saved[i][k];
      model.setOptimizerSteps(savedAdamSteps[i]);
    }
  };
  // Validates the pending step; true when it was rolled back (its checked
  // update now applied instead).
  auto validatePending = [&]() -> llvm::Expected<bool> {
    const int step = pending;
    pending = -1;
    llvm::Expected<std::vector<double>> all = hooks.finishChecks(step);
    if (!all)
      return all.takeError();
    Verdict v = verdictOf(*all);
    if (!v.changesTheUpdate())
      return false;
    restore();
    apply(v);
    if (hooks.rollbacks)
      ++*hooks.rollbacks;
    if (llvm::Error err = note(v, step))
      return std::move(err);
    return true;
  };
  auto checkpointDue = [&](int done) {
    return !train.checkpointDir.empty() && train.checkpointEvery > 0 &&
           (done % train.checkpointEvery == 0 || done == train.steps);
  };
  const bool overlap = train.overlapSteps && hooks.postChecks;
  for (int step = first; step < train.steps; ++step) {
    if (hooks.atStep)
      if (llvm::Error err = hooks.atStep(step))
        return err;
    for (auto &[index, model] : models.all) {
      model->setStep(step);
      model->zeroGrad();
    }
    if (llvm::Error err = pass())
      return err;
    if (hooks.stepAgain) {
      llvm::Expected<bool> again = hooks.stepAgain(step);
      if (!again)
        return again.takeError();
      if (*again) {
        --step;
        continue;
      }
    }
    double loss = 0.0;
    if (lastStage)
      for (int mb = 0; mb < plan.microbatches; ++mb) {
        double l = lastStage->loss(mb);
        if (!std::isfinite(l))
          return llvm::createStringError(
              llvm::inconvertibleErrorCode(),
              fmt::format("training diverged: step {}: stage @{}: the loss of "
                          "microbatch {} is {}",
                          step, plan.stageNames[last], mb, l));
        loss += l / plan.microbatches;
      }
    if (lastStage && hooks.reduceLoss) {
      llvm::Expected<double> all = hooks.reduceLoss(loss);
      if (!all)
        return all.takeError();
      loss = *all;
    }
    if (step == train.nanStep)
      for (auto &[index, model] : models.all)
        if (index == train.nanStage)
          model->parameters().front().grad.front() =
              std::numeric_limits<float>::quiet_NaN();
    if (!globalChecks)
      // Without the other ranks' checks (a backend that does not exchange
      // them), a non-finite gradient stops the run.
      for (auto &[index, model] : models.all)
        for (const kernels::Parameter &param : model->parameters())
          for (size_t i = 0; i < param.grad.size(); ++i)
            if (!std::isfinite(param.grad[i]))
              return llvm::createStringError(
                  llvm::inconvertibleErrorCode(),
                  fmt::format("training diverged: step {}: stage @{}: "
                              "gradient of {} element {} is {} (summed over "
                              "the microbatches)",
                              step, plan.stageNames[index], param.name, i,
                              param.grad[i]));
    const std::vector<double> mine = localChecks();
    if (pending >= 0) {
      llvm::Expected<bool> rolledBack = validatePending();
      if (!rolledBack)
        return rolledBack.takeError();
      if (*rolledBack) {
        // This step ran on the update just undone: run it again.
        --step;
        continue;
      }
    }
    losses.push_back(loss);
    if (step == first)
      if (llvm::Error err = dumpAll(train.dumpGrads, true))
        return err;
    if (overlap) {
      if (llvm::Error err = hooks.postChecks(step, mine))
        return err;
      save();
      // Optimistically the update without clipping; a rank whose own
      // gradient is not finite already knows the step is skipped.
      if (mine[1] == 0.0)
        apply(Verdict{});
      pending = step;
      // A checkpoint and the end of the run hold checked weights.
      if (step + 1 == train.steps || checkpointDue(step + 1)) {
        llvm::Expected<bool> rolledBack = validatePending();
        if (!rolledBack)
          return rolledBack.takeError();
      }
    } else {
      llvm::Expected<std::vector<double>> all = exchange(step, mine);
      if (!all)
        return all.takeError();
      Verdict v = verdictOf(*all);
      apply(v);
      if (llvm::Error err = note(v, step))
        return err;
    }
    if (hooks.stepEnds && hooks.now) {
      hooks.stepEnds->resize(step - first + 1);
      hooks.stepEnds->back() = hooks.now();
    }
    if (llvm::Error err = checkpoint(step + 1))
      return err;
    if (stop) {
      if (hooks.stoppedAt)
        *hooks.stoppedAt = step + 1;
      return llvm::Error::success();
    }
  }
  return dumpAll(train.dumpWeights, false);
}

kernels::StageFactory
stagecraft::runtime::hostStagesFor(const TrainOptions &train) {
  return train.deviceModel ? kernels::device::hostDeviceStages()
                           : kernels::hostStages();
}

llvm::Error
stagecraft::runtime::checkTrainingBuffers(const sched::Plan &plan, int rank,
                                          const kernels::ModelConfig &base) {
  // A branching model's longest sequence (a join's) sizes its messages.
  kernels::ModelConfig model = base;
  if (!plan.stageInputs.empty())
    model.sequence = stageGraph(plan, base.sequence).longest();
  for (const sched::PlanOp &op : plan.ranks[rank].ops)
    if (op.kind == sched::PlanOp::Kind::Send ||
        op.kind == sched::PlanOp::Kind::Recv)
      if (op.buffer.bytes < trainingMessageBytes(model))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            fmt::format("a {}-byte message buffer cannot hold the model's "
                        "largest message ({} bytes of Q, K and V); build the "
                        "plan with --pipe-to-plan --message-bytes={}",
                        op.buffer.bytes, 3 * model.messageBytes(),
                        trainingMessageBytes(model)));
  return llvm::Error::success();
}

float *stagecraft::runtime::findMessage(
    const std::vector<sched::SlotUse> &uses, sched::BufferKind kind, int stage,
    llvm::function_ref<float *(const sched::SlotUse &)> payload) {
  for (const sched::SlotUse &u : uses) {
    sched::TagParts t = sched::decodeTag(u.tag);
    if (t.kind == static_cast<int>(kind) && t.stage == stage)
      return payload(u);
  }
  return nullptr;
}

llvm::Error stagecraft::runtime::runLayerCompute(
    const sched::PlanOp &op, RankModels &models,
    llvm::function_ref<float *(const sched::SlotUse &)> payload) {
  using BK = sched::BufferKind;
  const sched::Action &a = op.action;
  auto stage = [&](int s) -> kernels::LayerStage & {
    return *models.stages.at(s);
  };
  const StageGraph &g = models.graph;
  auto forward = [&](int s, int mb) {
    const float *in =
        g.empty()
            ? findMessage(op.reads, BK::Activation, s - 1, payload)
            : gatherInput(
                  g, s, models.batch, models.hidden,
                  [&](int i) {
                    return findMessage(op.reads, BK::Activation, i, payload);
                  },
                  models.inputScratch);
    stage(s).forward(mb, in,
                     findMessage(op.writes, BK::Activation, s, payload));
  };
  auto input = [&](int s, int mb) {
    const float *grad =
        g.empty()
            ? findMessage(op.reads, BK::Gradient, s + 1, payload)
            : gatherOutputGradient(
                  g, s, models.batch, models.hidden,
                  [&](int c) {
                    return findMessage(op.reads, BK::Gradient, c, payload);
                  },
                  models.gradientScratch);
    stage(s).backwardInput(mb, grad,
                           findMessage(op.writes, BK::Gradient, s, payload));
  };
  switch (a.kind) {
  case sched::ActionKind::Forward:
    forward(a.stage, a.microbatch);
    break;
  case sched::ActionKind::BackwardInput:
    input(a.stage, a.microbatch);
    break;
  case sched::ActionKind::BackwardWeight:
    stage(a.stage).backwardWeight(a.microbatch);
    break;
  case sched::ActionKind::Backward:
    input(a.stage, a.microbatch);
    stage(a.stage).backwardWeight(a.microbatch);
    break;
  case sched::ActionKind::ForwardBackward:
    forward(a.stage, a.microbatch);
    input(a.backwardStage, a.backwardMicrobatch);
    stage(a.backwardStage).backwardWeight(a.backwardMicrobatch);
    break;
  case sched::ActionKind::AttentionForward:
  case sched::ActionKind::AttentionBackward:
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "attention tasks need a helix plan");
  }
  return llvm::Error::success();
}

StageGraph stagecraft::runtime::stageGraph(const sched::Plan &plan,
                                           int sequence) {
  StageGraph g;
  const int n = static_cast<int>(plan.stageInputs.size());
  if (n == 0)
    return g;
  g.inputs = plan.stageInputs;
  g.consumers.resize(n);
  for (int s = 0; s < n; ++s)
    for (int i : g.inputs[s])
      g.consumers[i].push_back(s);
  g.sequence.assign(n, 0);
  g.branch.assign(n, 0);
  g.firstLayer.assign(n, 0);
  int branches = 0;
  for (int s = 0; s < n; ++s) {
    const std::vector<int> &in = g.inputs[s];
    for (int i : in)
      g.sequence[s] += g.sequence[i];
    if (in.empty())
      g.sequence[s] = sequence;
    // A stage goes on with its input's branch when it is that input's
    // only consumer; sources, joins and the second branch of a fan-out
    // start one of their own.
    if (in.size() == 1 && g.consumers[in[0]].size() == 1) {
      g.branch[s] = g.branch[in[0]];
      g.firstLayer[s] = g.firstLayer[in[0]] + plan.stageLayers[in[0]];
    } else {
      g.branch[s] = branches++;
    }
  }
  return g;
}

int StageGraph::longest() const {
  return sequence.empty() ? 0
                          : *std::max_element(sequence.begin(), sequence.end());
}

const float *stagecraft::runtime::gatherInput(
    const StageGraph &g, int s, int batch, int hidden,
    llvm::function_ref<const float *(int)> outputOf,
    std::vector<float> &scratch) {
  const std::vector<int> &in = g.inputs[s];
  if (in.empty())
    return nullptr;
  if (in.size() == 1)
    return outputOf(in[0]);
  const size_t row = static_cast<size_t>(g.sequence[s]) * hidden;
  scratch.assign(row * batch, 0.0f);
  size_t at = 0;
  for (int i : in) {
    const float *src = outputOf(i);
    const size_t part = static_cast<size_t>(g.sequence[i]) * hidden;
    for (int b = 0; b < batch; ++b)
      std::copy(src + b * part, src + (b + 1) * part,
                scratch.begin() + b * row + at);
    at += part;
  }
  return scratch.data();
}

const float *stagecraft::runtime::gatherOutputGradient(
    const StageGraph &g, int s, int batch, int hidden,
    llvm::function_ref<const float *(int)> gradientOf,
    std::vector<float> &scratch) {
  const std::vector<int> &out = g.consumers[s];
  if (out.empty())
    return nullptr;
  const size_t part = static_cast<size_t>(g.sequence[s]) * hidden;
  if (out.size() == 1 && g.inputs[out[0]].size() == 1)
    return gradientOf(out[0]);
  scratch.assign(part * batch, 0.0f);
  for (int c : out) {
    // s's place in c's input, along the sequence.
    size_t at = 0;
    for (int i : g.inputs[c]) {
      if (i == s)
        break;
      at += static_cast<size_t>(g.sequence[i]) * hidden;
    }
    const size_t row = static_cast<size_t>(g.sequence[c]) * hidden;
    const float *src = gradientOf(c);
    for (int b = 0; b < batch; ++b)
      for (size_t k = 0; k < part; ++k)
        scratch[b * part + k] += src[b * row + at + k];
  }
  return scratch.data();
}

std::vector<Straggler> stagecraft::runtime::findStragglers(
    const std::vector<std::vector<double>> &rates, double threshold, int done) {
  std::vector<Straggler> found;
  const size_t p = rates.size();
  if (p < 2)
    return found;
  const size_t k = rates[0].size();
  std::vector<std::vector<double>> ratios(p);
  for (size_t i = 0; i < k; ++i) {
    std::vector<double> step;
    for (const std::vector<double> &r : rates)
      step.push_back(r[i]);
    if (llvm::any_of(step, [](double v) { return !std::isfinite(v); }))
      return found;
    std::vector<double> sorted = step;
    std::sort(sorted.begin(), sorted.end());
    double reference = sorted[(p - 1) / 2];
    if (!(reference > 0.0))
      return found;
    for (size_t r = 0; r < p; ++r)
      ratios[r].push_back(step[r] / reference);
  }
  for (size_t r = 0; r < p; ++r) {
    if (llvm::any_of(ratios[r], [&](double q) { return !(q > threshold); }))
      continue;
    std::vector<double> sorted = ratios[r];
    std::sort(sorted.begin(), sorted.end());
    Straggler s;
    s.rank = static_cast<int>(r);
    s.ratio = sorted[(k - 1) / 2];
    s.speedFactor = 1.0 / s.ratio;
    s.firstStep = done - static_cast<int>(k);
    s.lastStep = done - 1;
    found.push_back(s);
  }
  return found;
}

std::string
stagecraft::runtime::describeStraggler(const Straggler &s, int stoppedAt,
                                       llvm::ArrayRef<int> identity) {
  std::string who = fmt::format("rank {}", s.rank);
  if (s.rank < static_cast<int>(identity.size()) && identity[s.rank] != s.rank)
    who += fmt::format(" (rank {} of the first attempt)", identity[s.rank]);
  return fmt::format(
      "{}{} computed {:.2f}x as long per simulated unit as the reference "
      "rank (the lower median) in steps {}-{}; its measured speed is {:.4g} "
      "of the planned one; stopped at the checkpoint of step {} to re-plan",
      kStragglerPrefix, who, s.ratio, s.firstStep, s.lastStep, s.speedFactor,
      stoppedAt);
}

llvm::Error stagecraft::runtime::parseInjectedFailure(llvm::StringRef text,
                                                      TrainOptions &train) {
  llvm::SmallVector<llvm::StringRef, 3> parts;
  text.split(parts, ':');
  int r = -1, st = -1;
  bool ok = parts.size() >= 2 && parts.size() <= 3 &&
            !parts[0].getAsInteger(10, r) && r >= 0 &&
            !parts[1].getAsInteger(10, st) && st >= 0;
  TrainOptions::Inject mode = TrainOptions::Inject::Kill;
  if (ok && parts.size() == 3) {
    if (parts[2] == "hang")
      mode = TrainOptions::Inject::Hang;
    else if (parts[2] == "checkpoint")
      mode = TrainOptions::Inject::Checkpoint;
    else
      ok = parts[2] == "kill";
  }
  if (ok && mode == TrainOptions::Inject::Checkpoint && st < 1)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--inject-failure=" + text.str() +
            ": a checkpoint is written after step 1 at the earliest (STEP "
            "counts the steps done)");
  if (!ok)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--inject-failure=" + text.str() +
            ": expected RANK:STEP[:kill|hang|checkpoint] with RANK and STEP "
            ">= 0");
  train.injectRank = r;
  train.injectStep = st;
  train.inject = mode;
  return llvm::Error::success();
}

llvm::Error stagecraft::runtime::parseInjectedNonFinite(llvm::StringRef text,
                                                        TrainOptions &train) {
  std::pair<llvm::StringRef, llvm::StringRef> parts = text.split(':');
  int stage = -1, step = -1;
  if (parts.first.getAsInteger(10, stage) || stage < 0 ||
      parts.second.getAsInteger(10, step) || step < 0)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--inject-nonfinite=" + text.str() +
            ": expected STAGE:STEP with STAGE (its index) and STEP >= 0");
  train.nanStage = stage;
  train.nanStep = step;
  return llvm::Error::success();
}

llvm::Error stagecraft::runtime::parseInjectedSlowdown(llvm::StringRef text,
                                                       TrainOptions &train) {
  llvm::SmallVector<llvm::StringRef, 3> parts;
  text.split(parts, ':');
  int r = -1, st = -1;
  double factor = 0.0;
  bool ok = parts.size() == 3 && !parts[0].getAsInteger(10, r) && r >= 0 &&
            !parts[1].getAsInteger(10, st) && st >= 0 &&
            !parts[2].getAsDouble(factor) && std::isfinite(factor) &&
            factor >= 1.0 && factor <= 1000.0;
  if (!ok)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--inject-slowdown=" + text.str() +
            ": expected RANK:STEP:FACTOR with RANK and STEP >= 0 and FACTOR "
            "in [1, 1000] (each compute of the rank takes FACTOR times as "
            "long from step STEP)");
  train.slowRank = r;
  train.slowStep = st;
  train.slowFactor = factor;
  return llvm::Error::success();
}
