//===- Executor.cpp - Runs one rank of a plan -----------------------------===//
//
// See Executor.h. Buffer tags are written at three places in a slot (start,
// middle, end) so that a partial overwrite is caught too.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"

#include "kernels/device/HostDevice.h"
#include "runtime/Checkpoint.h"
#include "scheduler/Recompute.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <csignal>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <time.h>

using namespace stagecraft::runtime;
using namespace stagecraft::pipe;
namespace kernels = stagecraft::kernels;

std::string stagecraft::runtime::describePlanAction(const sched::Plan &plan,
                                                    const sched::Action &a) {
  auto name = [&](int s) {
    return s >= 0 && s < static_cast<int>(plan.stageNames.size())
               ? plan.stageNames[s]
               : std::to_string(s);
  };
  std::string text =
      fmt::format("{} @{} mb {}", sched::actionOpName(a.kind).str(),
                  name(a.stage), a.microbatch);
  if (a.kind == sched::ActionKind::ForwardBackward)
    text +=
        fmt::format(", @{} mb {}", name(a.backwardStage), a.backwardMicrobatch);
  return text;
}

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
  if (hooks.firstStep)
    *hooks.firstStep = first;
  // A straggler stops the run at the checkpoint (every rank is told in the
  // barrier, so all stop after the same step).
  bool stop = false;
  auto checkpoint = [&](int done) -> llvm::Error {
    if (train.checkpointDir.empty() || train.checkpointEvery <= 0 ||
        (done % train.checkpointEvery != 0 && done != train.steps))
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
  auto dumpAll = [&](const std::string &dir, bool gradients) -> llvm::Error {
    if (dir.empty())
      return llvm::Error::success();
    for (auto &[index, model] : models.all)
      if (llvm::Error err = dumpStage(*model, dir, gradients))
        return err;
    return llvm::Error::success();
  };
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
    // A non-finite gradient would poison the weights at the update.
    for (auto &[index, model] : models.all)
      for (const kernels::Parameter &param : model->parameters())
        for (size_t i = 0; i < param.grad.size(); ++i)
          if (!std::isfinite(param.grad[i]))
            return llvm::createStringError(
                llvm::inconvertibleErrorCode(),
                fmt::format("training diverged: step {}: stage @{}: gradient "
                            "of {} element {} is {} (summed over the "
                            "microbatches)",
                            step, plan.stageNames[index], param.name, i,
                            param.grad[i]));
    losses.push_back(loss);
    if (step == first)
      if (llvm::Error err = dumpAll(train.dumpGrads, true))
        return err;
    for (auto &[index, model] : models.all)
      model->step(train.optimizer);
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

/// The message of \p kind produced by \p stage among \p uses, or null.
static float *
findMessage(const std::vector<sched::SlotUse> &uses, sched::BufferKind kind,
            int stage,
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

namespace {
class RankRunner {
public:
  RankRunner(const sched::Plan &plan, int rank, Communicator &comm,
             ProgressMonitor &monitor, Clock::time_point start,
             const ExecOptions &options)
      : plan(plan), rank(rank), comm(comm), monitor(monitor), start(start),
        options(options), ops(plan.ranks[rank].ops) {
    for (int64_t bytes : plan.ranks[rank].slotBytes)
      slots.emplace_back(static_cast<size_t>(bytes), 0);
  }

  llvm::Expected<RankResult> run();

private:
  double now() const {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  /// The CPU seconds this rank's thread has computed: the device time of a
  /// CPU rank. Time the thread waits for a core (another process's turn on
  /// a loaded host) is not in it; a slower core is.
  static double cpuNow() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) +
           1e-9 * static_cast<double>(ts.tv_nsec);
  }
  llvm::Error fail(size_t at, const std::string &what) {
    monitor.abort();
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("rank {}: instruction {}: {}", rank, at, what));
  }
  /// Tags go at the start, middle and end of a buffer; when training, the
  /// middle holds the payload and only the ends carry tags.
  size_t middle(size_t size) const {
    return options.train ? 0 : (size / 2) & ~size_t(7);
  }
  void writeTag(const sched::SlotUse &use, uint64_t tag) {
    char *buf = slots[use.slot].data();
    size_t size = static_cast<size_t>(use.bytes);
    for (size_t off : {size_t(0), middle(size), size - 8})
      std::memcpy(buf + off, &tag, 8);
  }
  float *payload(const sched::SlotUse &use) {
    return reinterpret_cast<float *>(slots[use.slot].data() +
                                     kTrainingPayloadOffset);
  }
  /// The reference model's step for one compute.
  llvm::Error train(size_t at, const sched::PlanOp &op);
  llvm::Error runStream();
  /// The tag of the \p use.bytes-byte buffer in its slot, or 0 if the three
  /// copies disagree.
  uint64_t readTag(const sched::SlotUse &use) const {
    const char *buf = slots[use.slot].data();
    size_t size = static_cast<size_t>(use.bytes);
    size_t mid = middle(size);
    uint64_t a, b, c;
    std::memcpy(&a, buf, 8);
    std::memcpy(&b, buf + mid, 8);
    std::memcpy(&c, buf + size - 8, 8);
    return a == b && b == c ? a : 0;
  }
  llvm::Error expectTag(size_t at, const std::string &who, sched::SlotUse use) {
    uint64_t found = readTag(use);
    if (found == use.tag)
      return llvm::Error::success();
    return fail(at, fmt::format("{} reads slot {}: it holds {}, expected {}",
                                who, use.slot,
                                sched::describeTag(found, plan.stageNames),
                                sched::describeTag(use.tag, plan.stageNames)));
  }
  /// Runs \p slice until \p done holds, ending early (the error names
  /// \p who and the \p amount it computes) when another rank failed or the
  /// watchdog found no rank progressing for the timeout, this one included,
  /// instead of the process waiting it out. A hang report shows \p shown.
  llvm::Error runUntil(size_t at, const std::string &who,
                       const std::string &amount, const std::string &shown,
                       llvm::function_ref<bool()> done,
                       llvm::function_ref<void()> slice) {
    monitor.waiting(rank,
                    fmt::format("instruction {}: {} ({})", at, who, shown));
    while (!done()) {
      if (monitor.expired()) {
        monitor.waiting(rank, "");
        return fail(at, monitor.timedOut()
                            ? fmt::format("no rank progressed for {} s; {} "
                                          "computes for {}",
                                          monitor.timeoutSeconds(), who, amount)
                            : std::string("stopped: another rank failed"));
      }
      slice();
    }
    monitor.waiting(rank, "");
    return llvm::Error::success();
  }

  /// The timed kernel: sleeps `cost` time units in slices of 10 ms.
  llvm::Error sleepFor(size_t at, const std::string &who, double cost) {
    const double seconds = cost * options.timeUnit;
    const auto until =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(seconds));
    const std::string amount = fmt::format("{:.6g} s", seconds);
    return runUntil(
        at, who, amount, "timed kernel, " + amount,
        [&] { return Clock::now() >= until; },
        [&] {
          std::this_thread::sleep_until(
              std::min(until, Clock::now() + std::chrono::milliseconds(10)));
        });
  }

  /// Computes on this thread for \p seconds of its CPU time, as a device
  /// that many times slower would (--inject-slowdown).
  llvm::Error computeFor(size_t at, const std::string &who, double seconds) {
    const double until = cpuNow() + seconds;
    volatile double sink = 1.0;
    const std::string amount = fmt::format("{:.6g} CPU s", seconds);
    return runUntil(
        at, who, amount, amount, [&] { return cpuNow() >= until; },
        [&] {
          for (int i = 0; i < 2000; ++i)
            sink = sink * 1.0000001 + 1e-9;
        });
  }

  /// The start of training step \p step: the injected failure, if due.
  llvm::Error atStep(int step) {
    currentStep = step;
    const TrainOptions &t = *options.train;
    if (t.injectRank != rank || t.injectStep != step ||
        t.inject == TrainOptions::Inject::Checkpoint)
      return llvm::Error::success();
    stampFailure();
    if (t.inject == TrainOptions::Inject::Kill)
      return die(fmt::format("failed at step {}", step));
    // Stop making progress; on mpi for good, on local until the others
    // gave up (a thread cannot be killed).
    monitor.waiting(rank, fmt::format("nothing: it hangs at step {}", step));
    while (!options.ranksAreThreads || !monitor.aborted())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("{}rank {} stopped making progress at step {} (injected)",
                    kRankLostPrefix, rank, step));
  }

  /// This rank's part of the checkpoint after \p done steps is written:
  /// the injected failure while checkpointing, if due.
  llvm::Error atCheckpoint(int done) {
    const TrainOptions &t = *options.train;
    if (t.injectRank != rank || t.injectStep != done ||
        t.inject != TrainOptions::Inject::Checkpoint)
      return llvm::Error::success();
    stampFailure();
    return die(
        fmt::format("failed while writing the checkpoint of step {}", done));
  }

  /// The injected death: on mpi the process kills itself; on local the
  /// thread fails and the others stop.
  llvm::Error die(const std::string &what) {
    if (!options.ranksAreThreads)
      std::raise(SIGKILL);
    monitor.abort();
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("{}rank {} {} (injected)", kRankLostPrefix, rank, what));
  }

  /// Records when the injected failure fired (--failure-stamp).
  void stampFailure() {
    const std::string &path = options.train->failureStamp;
    if (path.empty())
      return;
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return; // only a measurement: the failure itself goes on
    os << fmt::format("{:.6f}\n",
                      std::chrono::duration<double>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count());
  }

  /// Returns once every rank has called it (a checkpoint's parts are all
  /// written): a message to rank 0 from each rank, then one back. Each
  /// channel's earlier messages of the step are already consumed, so they
  /// match in order. Watching for stragglers, each rank's message holds its
  /// compute seconds per simulated unit in the last steps, and rank 0's
  /// answer says whether to stop here (true) to re-plan.
  llvm::Expected<bool> barrier(int done) {
    const TrainOptions &t = *options.train;
    const int p = plan.numRanks();
    const std::string what = "the checkpoint barrier";
    const bool watch = t.stragglerThreshold > 0.0;
    const int k = watch ? t.stragglerSteps : 0;
    // The last k steps' rates, NaN for steps not run in this attempt.
    std::vector<double> mine(std::max(k, 1),
                             std::numeric_limits<double>::quiet_NaN());
    for (int i = 0; i < k; ++i) {
      int at = static_cast<int>(stepRates.size()) - k + i;
      if (at >= 0)
        mine[i] = stepRates[at];
    }
    const size_t bytes = watch ? sizeof(double) * k : 1;
    char decision = 0;
    if (rank != 0) {
      Request send, recv;
      if (llvm::Error err = comm.isend(0, mine.data(), bytes, send))
        return std::move(err);
      if (llvm::Error err = await(0, send, what))
        return std::move(err);
      if (llvm::Error err = comm.irecv(0, &decision, 1, recv))
        return std::move(err);
      if (llvm::Error err = await(0, recv, what))
        return std::move(err);
      return decision != 0;
    }
    std::vector<std::vector<double>> rates(p, mine);
    for (int r = 1; r < p; ++r) {
      Request recv;
      if (llvm::Error err = comm.irecv(r, rates[r].data(), bytes, recv))
        return std::move(err);
      if (llvm::Error err = await(0, recv, what))
        return std::move(err);
    }
    if (watch) {
      result.stragglers = findStragglers(rates, t.stragglerThreshold, done);
      decision = result.stragglers.empty() ? 0 : 1;
    }
    for (int r = 1; r < p; ++r) {
      Request send;
      if (llvm::Error err = comm.isend(r, &decision, 1, send))
        return std::move(err);
      if (llvm::Error err = await(0, send, what))
        return std::move(err);
    }
    return decision != 0;
  }

  /// This rank's number in the first attempt.
  int identity() const {
    const std::vector<int> &id = options.train->identity;
    return rank < static_cast<int>(id.size()) ? id[rank] : rank;
  }
  /// Whether --inject-slowdown slows this rank's computes now.
  bool slowed() const {
    const TrainOptions &t = *options.train;
    return t.slowRank >= 0 && identity() == t.slowRank &&
           currentStep >= t.slowStep && t.slowFactor > 1.0;
  }

  /// Waits for \p request; the hang report names \p what.
  llvm::Error await(size_t at, Request &request, const std::string &what) {
    if (!request.active())
      return llvm::Error::success();
    monitor.waiting(rank, fmt::format("instruction {}: {}", at, what));
    double t0 = now();
    llvm::Error err = comm.wait(request, monitor);
    result.waiting += now() - t0;
    monitor.waiting(rank, "");
    if (!err)
      return llvm::Error::success();
    std::string message = llvm::toString(std::move(err));
    if (message == "no progress" && monitor.timedOut() && options.train) {
      // Training stalls only when a rank died or hangs: name the rank this
      // one waits on, and the step.
      monitor.abort();
      int peer = -1;
      if (at < ops.size()) {
        const sched::PlanOp &op = ops[at];
        if (op.kind == sched::PlanOp::Kind::Group && !op.ops.empty())
          peer = op.ops.front().peer;
        else if (op.kind != sched::PlanOp::Kind::Compute)
          peer = op.peer;
      }
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("{}rank {} sent nothing for {} s at step {} (rank {} "
                      "waits for {})",
                      kRankLostPrefix,
                      peer >= 0 ? std::to_string(peer) : std::string("?"),
                      monitor.timeoutSeconds(), currentStep, rank, what));
    }
    if (message == "no progress")
      return fail(at, monitor.giveUpReason(what));
    return fail(at, fmt::format("{}: {}", what, message));
  }
  std::string commText(const sched::PlanOp &op) const {
    return fmt::format("{} {} {} rank {} (slot {})",
                       op.kind == sched::PlanOp::Kind::Send ? "send" : "recv",
                       sched::describeTag(op.buffer.tag, plan.stageNames),
                       op.kind == sched::PlanOp::Kind::Send ? "to" : "from",
                       op.peer, op.buffer.slot);
  }
  /// Posts a receive into \p request, or a send out of a copy of its buffer:
  /// the slot is free at once and the send completes whenever the peer takes
  /// it, so sends never hold up the stream, alone or in a group. (The
  /// verifier assumes NCCL's stricter groups, whose sends wait for their
  /// receives; every plan it accepts runs here too.)
  llvm::Error post(size_t at, const sched::PlanOp &op, Request &request) {
    std::vector<char> &buf = slots[op.buffer.slot];
    size_t bytes = static_cast<size_t>(op.buffer.bytes);
    if (op.kind == sched::PlanOp::Kind::Recv)
      return comm.irecv(op.peer, buf.data(), bytes, request);
    if (llvm::Error err = expectTag(at, "send", op.buffer))
      return err;
    outstanding.push_back(
        {std::make_unique<std::vector<char>>(buf.begin(), buf.begin() + bytes),
         Request{}, at, commText(op)});
    Outstanding &o = outstanding.back();
    if (!options.train && op.transfer > 0.0) {
      // Emulated link: when the send left and how long it holds the link,
      // between the start tag and the middle one (buffers are >= 64 bytes).
      double stamp[2] = {epochSeconds(), op.transfer * options.timeUnit};
      std::memcpy(o.copy->data() + 8, stamp, sizeof stamp);
    }
    if (llvm::Error err = comm.isend(op.peer, o.copy->data(), bytes, o.request))
      return err;
    return reapSends();
  }
  /// Seconds on the host's monotonic clock, the same in every process.
  static double epochSeconds() {
    return std::chrono::duration<double>(Clock::now().time_since_epoch())
        .count();
  }
  /// A received message on an emulated link (its send carries a transfer
  /// time): it arrives once the link, free after the previous message from
  /// the same peer, has carried it for that time; waits until then. The
  /// link's messages come in the sender's order (in-order matching), so
  /// this queues them as the simulator does.
  llvm::Error arrive(size_t at, const sched::PlanOp &recv) {
    if (options.train || !plan.links)
      return llvm::Error::success();
    double stamp[2];
    std::memcpy(stamp, slots[recv.buffer.slot].data() + 8, sizeof stamp);
    if (!(stamp[1] > 0.0))
      return llvm::Error::success();
    if (linkFree.empty())
      linkFree.assign(plan.numRanks(), 0.0);
    double &free = linkFree[recv.peer];
    free = std::max(stamp[0], free) + stamp[1];
    double wait = free - epochSeconds();
    if (wait <= 0.0)
      return llvm::Error::success();
    return sleepFor(at, fmt::format("the link from rank {}", recv.peer),
                    wait / options.timeUnit);
  }
  /// Drops the copies of sends that have completed, oldest first.
  llvm::Error reapSends() {
    while (!outstanding.empty()) {
      llvm::Expected<bool> done = comm.test(outstanding.front().request);
      if (!done)
        return done.takeError();
      if (!*done)
        break;
      outstanding.pop_front();
    }
    return llvm::Error::success();
  }

  const sched::Plan &plan;
  int rank;
  Communicator &comm;
  ProgressMonitor &monitor;
  Clock::time_point start;
  const ExecOptions &options;
  const std::vector<sched::PlanOp> &ops;
  std::vector<std::vector<char>> slots;
  struct Outstanding {
    std::unique_ptr<std::vector<char>> copy;
    Request request;
    size_t at;
    std::string what;
  };
  std::deque<Outstanding> outstanding;
  /// Emulated links: when each peer's link to this rank is next free.
  std::vector<double> linkFree;
  RankResult result;
  int computes = 0;
  /// Training: the step running.
  int currentStep = 0;
  /// Training: the compute CPU seconds per simulated unit of each step run,
  /// and the CPU seconds computed so far in the step running.
  std::vector<double> stepRates;
  double stepCpu = 0.0;
  /// Training: this rank's model pieces, and the attention of each layer
  /// that runs here (created when first needed).
  RankModels models;
  std::map<int, kernels::HelixAttention> attention;
};
} // namespace

llvm::Expected<RankResult> RankRunner::run() {
#ifdef __linux__
  // Timed kernels sleep; the default 50 us timer slack would add that much
  // to every action.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
#endif
  result.rank = rank;
  double t0 = now();
  if (!options.train) {
    if (llvm::Error err = runStream())
      return std::move(err);
  } else {
    const TrainOptions &train = *options.train;
    if (llvm::Error err = checkTrainingBuffers(plan, rank, train.model))
      return fail(0, llvm::toString(std::move(err)));
    llvm::Expected<RankModels> built =
        buildStages(plan, rank, train, hostStagesFor(train));
    if (!built)
      return fail(0, llvm::toString(built.takeError()));
    models = std::move(*built);
    // The simulated compute of one step here, in units.
    double units = 0.0;
    for (const sched::PlanOp &op : ops)
      if (op.kind == sched::PlanOp::Kind::Compute)
        units += op.cost;
    TrainHooks hooks;
    hooks.firstStep = &result.firstStep;
    hooks.rank = rank;
    hooks.ranks = plan.numRanks();
    hooks.barrier = [&](int done) { return barrier(done); };
    hooks.stoppedAt = &result.stoppedAt;
    hooks.atStep = [&](int step) { return atStep(step); };
    hooks.atCheckpoint = [&](int done) { return atCheckpoint(done); };
    hooks.resumeSeconds = &result.resumeSeconds;
    if (llvm::Error err = trainSteps(
            plan, models, train,
            [&]() -> llvm::Error {
              stepCpu = 0.0;
              if (llvm::Error err = runStream())
                return err;
              // An attempt's first step warms up (allocation, caches): not
              // judged.
              stepRates.push_back(stepRates.empty() || !(units > 0.0)
                                      ? std::numeric_limits<double>::quiet_NaN()
                                      : stepCpu / units);
              return llvm::Error::success();
            },
            result.losses, hooks))
      return std::move(err);
    if (models.metered)
      result.activationPeak = models.meter->peak;
  }
  for (Outstanding &o : outstanding)
    if (llvm::Error err = await(o.at, o.request, o.what + ", to complete"))
      return std::move(err);
  result.wall = now();
  result.overhead =
      std::max(0.0, (result.wall - t0) - result.busy - result.waiting);
  return result;
}

llvm::Error RankRunner::train(size_t at, const sched::PlanOp &op) {
  // Inputs and outputs by what their tags hold.
  auto payloadOf = [&](const sched::SlotUse &u) { return payload(u); };
  auto find = [&](const std::vector<sched::SlotUse> &uses,
                  sched::BufferKind kind, int stage) {
    return findMessage(uses, kind, stage, payloadOf);
  };
  const sched::Action &a = op.action;
  using BK = sched::BufferKind;
  if (!models.blocks.empty()) {
    // HelixPipe: blocks and the attention between them.
    auto attentionOf = [&](int s) -> kernels::HelixAttention & {
      return attention.try_emplace(s, options.train->model).first->second;
    };
    auto input = [&](int s, int mb) {
      models.blocks.at(s)->backwardInput(
          mb, find(op.reads, BK::Gradient, s + 1),
          find(op.reads, BK::QkvGrad, s), find(op.writes, BK::Gradient, s),
          find(op.writes, BK::AttentionOutputGrad, s - 1));
    };
    switch (a.kind) {
    case sched::ActionKind::Forward:
      models.blocks.at(a.stage)->forward(
          a.microbatch, find(op.reads, BK::Activation, a.stage - 1),
          find(op.reads, BK::AttentionOutput, a.stage - 1),
          find(op.writes, BK::Activation, a.stage),
          find(op.writes, BK::Qkv, a.stage));
      break;
    case sched::ActionKind::AttentionForward:
      attentionOf(a.stage).forward(
          a.microbatch, find(op.reads, BK::Qkv, a.stage),
          find(op.writes, BK::AttentionOutput, a.stage));
      break;
    case sched::ActionKind::AttentionBackward:
      attentionOf(a.stage).backward(
          a.microbatch, find(op.reads, BK::AttentionOutputGrad, a.stage),
          find(op.writes, BK::QkvGrad, a.stage));
      break;
    case sched::ActionKind::BackwardInput:
      input(a.stage, a.microbatch);
      break;
    case sched::ActionKind::Backward:
      input(a.stage, a.microbatch);
      models.blocks.at(a.stage)->backwardWeight(a.microbatch);
      break;
    case sched::ActionKind::BackwardWeight:
      models.blocks.at(a.stage)->backwardWeight(a.microbatch);
      break;
    case sched::ActionKind::ForwardBackward:
      return fail(at, "overlapped actions are not trained on helix blocks");
    }
    return llvm::Error::success();
  }
  if (llvm::Error err = runLayerCompute(op, models, payloadOf))
    return fail(at, llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Error RankRunner::runStream() {
  computes = 0;
  for (size_t at = 0; at < ops.size(); ++at) {
    if (options.killAfter >= 0 && static_cast<int>(at) == options.killAfter)
      std::raise(SIGKILL);
    if (monitor.aborted())
      return fail(at, "stopped: another rank failed");
    const sched::PlanOp &op = ops[at];
    switch (op.kind) {
    case sched::PlanOp::Kind::Compute: {
      std::string who = describePlanAction(plan, op.action);
      for (const sched::SlotUse &use : op.reads)
        if (llvm::Error err = expectTag(at, who, use))
          return std::move(err);
      double begin = now();
      if (options.train) {
        const double cpuBegin = cpuNow();
        if (llvm::Error err = train(at, op))
          return err;
        if (slowed())
          if (llvm::Error err = computeFor(at, who + " (injected slowdown)",
                                           (options.train->slowFactor - 1.0) *
                                               (cpuNow() - cpuBegin)))
            return err;
        stepCpu += cpuNow() - cpuBegin;
      } else if (llvm::Error err = sleepFor(at, who, op.cost)) {
        return err;
      }
      for (const sched::SlotUse &use : op.writes)
        writeTag(use, use.tag);
      double end = now();
      result.busy += end - begin;
      result.actions.push_back({computes++, begin, end});
      break;
    }
    case sched::PlanOp::Kind::Send:
    case sched::PlanOp::Kind::Recv: {
      Request recv;
      if (llvm::Error err = post(at, op, recv))
        return fail(at, llvm::toString(std::move(err)));
      if (llvm::Error err = await(at, recv, commText(op)))
        return std::move(err);
      if (op.kind == sched::PlanOp::Kind::Recv) {
        if (llvm::Error err = expectTag(at, "recv", op.buffer))
          return std::move(err);
        if (llvm::Error err = arrive(at, op))
          return err;
      }
      break;
    }
    case sched::PlanOp::Kind::Group: {
      std::vector<Request> requests(op.ops.size());
      for (size_t k = 0; k < op.ops.size(); ++k)
        if (llvm::Error err = post(at, op.ops[k], requests[k]))
          return fail(at, llvm::toString(std::move(err)));
      for (size_t k = 0; k < op.ops.size(); ++k) {
        const sched::PlanOp &sub = op.ops[k];
        if (llvm::Error err = await(at, requests[k], "group: " + commText(sub)))
          return std::move(err);
        if (sub.kind == sched::PlanOp::Kind::Recv) {
          if (llvm::Error err = expectTag(at, "recv", sub.buffer))
            return std::move(err);
          if (llvm::Error err = arrive(at, sub))
            return err;
        }
      }
      break;
    }
    case sched::PlanOp::Kind::Free: {
      if (llvm::Error err = expectTag(at, "free", op.buffer))
        return std::move(err);
      writeTag(op.buffer, 0);
      break;
    }
    }
    monitor.progress(rank);
    ++result.instructions;
  }
  return llvm::Error::success();
}

llvm::Expected<RankResult>
stagecraft::runtime::executeRank(const sched::Plan &plan, int rank,
                                 Communicator &comm, ProgressMonitor &monitor,
                                 Clock::time_point start,
                                 const ExecOptions &options) {
  return RankRunner(plan, rank, comm, monitor, start, options).run();
}

std::vector<double>
stagecraft::runtime::plannedActivationPeaks(const sched::Plan &plan,
                                            const kernels::ModelConfig &model) {
  const int n = static_cast<int>(plan.stageNames.size());
  if (!model.lengths.empty() || !plan.stageInputs.empty())
    return {};
  for (bool attention : plan.stageAttention)
    if (attention)
      return {};
  sched::Problem problem;
  problem.name = plan.pipeline;
  problem.ranks = plan.numRanks();
  problem.microbatches = plan.microbatches;
  for (int s = 0; s < n; ++s) {
    int layers =
        s < static_cast<int>(plan.stageLayers.size()) ? plan.stageLayers[s] : 0;
    if (layers < 1)
      return {};
    kernels::ActivationBytes bytes =
        kernels::activationBytes(model, s, n, layers);
    sched::Stage stage;
    stage.name = plan.stageNames[s];
    stage.activation = bytes.activation;
    stage.weightGrad = bytes.weightGrad;
    stage.recomputed = bytes.recomputed;
    stage.selective = bytes.selective;
    stage.selectiveCost = 0.0;
    problem.stages.push_back(stage);
  }
  return sched::peakMemoryByOrder(problem, plan.computeSchedule());
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
