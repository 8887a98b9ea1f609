//===- Problem.cpp - Pipeline scheduling problem --------------------------===//
//
// Validation of a scheduling problem; see Problem.h for the preconditions.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/Problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace stagecraft::pipe::sched;

bool Problem::isPinned() const {
  if (stages.empty())
    return false;
  for (const Stage &stage : stages)
    if (!stage.rank)
      return false;
  return true;
}

double Problem::capacityOf(int r) const {
  if (r >= 0 && r < static_cast<int>(devices.size()) && devices[r].memory)
    return *devices[r].memory;
  return capacity ? *capacity : std::numeric_limits<double>::infinity();
}

double Problem::transferTime(int from, int to, int stage,
                             int microbatch) const {
  return transferTimeOfUnits(
      from, to, stage >= 0 && stage < numStages() ? stages[stage].output : 0.0,
      microbatch);
}

double Problem::transferTimeOfUnits(int from, int to, double units,
                                    int microbatch) const {
  if (from == to)
    return 0.0;
  if (!links)
    return latency;
  const Link &link =
      from / links->node == to / links->node ? links->intra : links->inter;
  return link.latency + units * memoryScale(microbatch) / link.bandwidth;
}

std::vector<int> Problem::inputsOf(int s) const {
  if (s < 0 || s >= numStages())
    return {};
  if (stages[s].inputs)
    return *stages[s].inputs;
  return s > 0 ? std::vector<int>{s - 1} : std::vector<int>{};
}

std::vector<int> Problem::consumersOf(int s) const {
  std::vector<int> consumers;
  for (int c = s + 1; c < numStages(); ++c) {
    std::vector<int> in = inputsOf(c);
    if (std::find(in.begin(), in.end(), s) != in.end())
      consumers.push_back(c);
  }
  return consumers;
}

Problem::Edges Problem::edges() const {
  Edges e;
  e.inputs.resize(numStages());
  e.consumers.resize(numStages());
  for (int s = 0; s < numStages(); ++s) {
    e.inputs[s] = inputsOf(s);
    for (int i : e.inputs[s])
      if (i >= 0 && i < numStages())
        e.consumers[i].push_back(s);
  }
  return e;
}

bool Problem::isChain() const {
  for (int s = 0; s < numStages(); ++s)
    if (stages[s].inputs &&
        *stages[s].inputs !=
            (s > 0 ? std::vector<int>{s - 1} : std::vector<int>{}))
      return false;
  return true;
}

double Problem::gradientUnits(int c) const {
  double units = 0.0;
  for (int i : inputsOf(c))
    units += stages[i].output;
  return units;
}

double Problem::speedOf(int r) const {
  return r >= 0 && r < static_cast<int>(devices.size()) ? devices[r].speed
                                                        : 1.0;
}

Problem
stagecraft::pipe::sched::scaledForDevices(const Problem &problem,
                                          llvm::ArrayRef<int> placement) {
  Problem scaled = problem;
  if (!problem.hasDevices())
    return scaled;
  // Without a placement, only the speeds go (every stage as on speed 1).
  for (size_t s = 0; s < scaled.stages.size() && s < placement.size(); ++s) {
    Stage &st = scaled.stages[s];
    double speed = problem.speedOf(placement[s]);
    st.forward /= speed;
    st.backwardInput /= speed;
    st.backwardWeight /= speed;
    if (st.forwardBackward)
      *st.forwardBackward /= speed;
    if (st.fusedBackward)
      *st.fusedBackward /= speed;
    if (st.selectiveCost)
      *st.selectiveCost /= speed;
    if (st.attention) {
      st.attention->forward /= speed;
      st.attention->backward /= speed;
    }
  }
  // Speeds are folded in; memories stay per rank.
  for (Problem::Device &d : scaled.devices)
    d.speed = 1.0;
  return scaled;
}

double stagecraft::pipe::sched::overlappedCost(const Stage &f, const Stage &b) {
  double cost =
      f.forward + b.backward() - 0.5 * (f.overlapGain() + b.overlapGain());
  return std::max(cost, std::max(f.forward, b.backward()));
}

static bool isNonNegativeFinite(double value) {
  return std::isfinite(value) && value >= 0.0;
}

llvm::Error stagecraft::pipe::sched::validateProblem(const Problem &problem) {
  auto fail = [](std::string message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (problem.ranks < 1)
    return fail(fmt::format("ranks must be at least 1, got {}", problem.ranks));
  if (problem.microbatches < 1)
    return fail(fmt::format("microbatches must be at least 1, got {}",
                            problem.microbatches));
  if (!isNonNegativeFinite(problem.latency))
    return fail(fmt::format("latency must be finite and non-negative, got {}",
                            problem.latency));
  if (!isNonNegativeFinite(problem.receiveOverhead))
    return fail(fmt::format("receive_overhead must be finite and "
                            "non-negative, got {}",
                            problem.receiveOverhead));
  if (!isNonNegativeFinite(problem.messageOverhead))
    return fail(fmt::format("message_overhead must be finite and "
                            "non-negative, got {}",
                            problem.messageOverhead));
  if (!problem.devices.empty() &&
      static_cast<int>(problem.devices.size()) != problem.ranks)
    return fail(fmt::format("devices(...) assigns {} ranks; the pipeline has "
                            "{}",
                            problem.devices.size(), problem.ranks));
  for (const Problem::Device &d : problem.devices) {
    if (!(d.speed > 0.0) || !std::isfinite(d.speed))
      return fail(fmt::format("device @{}: speed must be finite and "
                              "positive, got {}",
                              d.name, d.speed));
    if (d.memory && (!(*d.memory > 0.0) || !std::isfinite(*d.memory)))
      return fail(fmt::format("device @{}: memory must be finite and "
                              "positive, got {}",
                              d.name, *d.memory));
  }
  if (problem.links) {
    if (problem.links->node < 1)
      return fail(fmt::format("links: node = {} must be at least 1",
                              problem.links->node));
    for (const Problem::Link *l :
         {&problem.links->intra, &problem.links->inter})
      if (!std::isfinite(l->latency) || l->latency < 0.0 ||
          !std::isfinite(l->bandwidth) || !(l->bandwidth > 0.0))
        return fail(fmt::format("links: latency must be finite and "
                                "non-negative and bandwidth finite and "
                                "positive, got latency = {}, bandwidth = {}",
                                l->latency, l->bandwidth));
  }
  if (problem.capacity &&
      (!std::isfinite(*problem.capacity) || *problem.capacity <= 0.0))
    return fail(fmt::format("capacity must be finite and positive, got {}",
                            *problem.capacity));
  if (problem.hasLengths()) {
    if (problem.lengths.size() != static_cast<size_t>(problem.microbatches))
      return fail(fmt::format("lengths gives {} lengths for {} microbatches",
                              problem.lengths.size(), problem.microbatches));
    for (size_t m = 0; m < problem.lengths.size(); ++m)
      if (!std::isfinite(problem.lengths[m]) || problem.lengths[m] <= 0.0)
        return fail(fmt::format("lengths: microbatch {}'s length must be "
                                "finite and positive, got {}",
                                m, problem.lengths[m]));
    if (!std::isfinite(problem.referenceLength) ||
        problem.referenceLength <= 0.0)
      return fail(fmt::format("the reference length must be finite and "
                              "positive, got {}",
                              problem.referenceLength));
  }
  // Every microbatch's factors must be finite numbers: an overflowing
  // length^2 would make costs infinite or NaN.
  if (problem.hasLengths() &&
      problem.lengths.size() == static_cast<size_t>(problem.microbatches))
    for (int s = 0; s < problem.numStages(); ++s)
      for (int m = 0; m < problem.microbatches; ++m) {
        double c = problem.costScale(s, m), k = problem.memoryScale(m);
        if (!std::isfinite(c) || !std::isfinite(k) || c < 0.0)
          return fail(fmt::format(
              "stage @{}: microbatch {} (length {}, reference {}) scales its "
              "costs by {} and its memory by {}; both must be finite",
              problem.stages[s].name, m, problem.lengths[m],
              problem.referenceLength, c, k));
      }
  for (const Stage &stage : problem.stages)
    if (!isNonNegativeFinite(stage.scalingLinear) ||
        !isNonNegativeFinite(stage.scalingQuadratic) ||
        stage.scalingLinear + stage.scalingQuadratic <= 0.0)
      return fail(fmt::format("stage @{}: scaling linear = {}, quadratic = {} "
                              "must be finite and non-negative, not both 0",
                              stage.name, stage.scalingLinear,
                              stage.scalingQuadratic));
  if (problem.stages.empty())
    return fail("pipeline has no stages");
  // A branching pipeline: inputs name earlier stages (so the graph is
  // acyclic), each once; every stage feeds the last (the loss).
  for (int s = 0; s < problem.numStages(); ++s) {
    const Stage &stage = problem.stages[s];
    if (!stage.inputs)
      continue;
    std::vector<int> seen;
    for (int i : *stage.inputs) {
      if (i < 0 || i >= s)
        return fail(fmt::format(
            "stage @{}: input {} is not a stage written before it (a stage "
            "takes outputs of earlier stages, so the stage graph is acyclic)",
            stage.name,
            i >= 0 && i < problem.numStages() ? "@" + problem.stages[i].name
                                              : "#" + std::to_string(i)));
      if (std::find(seen.begin(), seen.end(), i) != seen.end())
        return fail(fmt::format("stage @{}: input @{} is named twice",
                                stage.name, problem.stages[i].name));
      seen.push_back(i);
    }
    if (stage.attention && !problem.isChain())
      return fail(fmt::format("stage @{}: attention tasks (helix) need a "
                              "chain of stages, not inputs(...)",
                              stage.name));
  }
  for (int s = 0; s + 1 < problem.numStages(); ++s)
    if (problem.consumersOf(s).empty())
      return fail(fmt::format(
          "stage @{}: no stage takes its output, so it does not reach the "
          "last stage @{} (the loss)",
          problem.stages[s].name, problem.stages.back().name));
  if (problem.numStages() < problem.ranks)
    return fail(fmt::format("{} stages cannot occupy {} ranks: some rank would "
                            "host no stage",
                            problem.numStages(), problem.ranks));
  bool anyPinned = false;
  for (const Stage &stage : problem.stages) {
    const std::pair<const char *, double> values[] = {
        {"forward", stage.forward},
        {"backward_input", stage.backwardInput},
        {"backward_weight", stage.backwardWeight},
        {"activation", stage.activation},
        {"weight_grad", stage.weightGrad},
        {"params", stage.params}};
    if (stage.selective.has_value() != stage.selectiveCost.has_value())
      return fail(fmt::format(
          "stage @{}: selective recomputation needs both memory(selective = "
          "S) and cost(selective = C); only the {} is given",
          stage.name, stage.selective ? "memory" : "cost"));
    if (stage.selective && (!isNonNegativeFinite(*stage.selective) ||
                            !isNonNegativeFinite(*stage.selectiveCost) ||
                            *stage.selective > stage.activation))
      return fail(fmt::format("stage @{}: selective memory ({}) and cost ({}) "
                              "must be finite and non-negative, the memory at "
                              "most activation ({})",
                              stage.name, *stage.selective,
                              *stage.selectiveCost, stage.activation));
    if (stage.attention) {
      const Stage::Attention &a = *stage.attention;
      for (auto [key, value] :
           {std::pair<const char *, double>{"forward", a.forward},
            {"backward", a.backward},
            {"memory", a.memory}})
        if (!isNonNegativeFinite(value))
          return fail(fmt::format("stage @{}: attention '{}' must be finite "
                                  "and non-negative, got {}",
                                  stage.name, key, value));
      if (&stage == &problem.stages.back())
        return fail(fmt::format("stage @{}: attention after the last stage "
                                "has no stage to feed",
                                stage.name));
    }
    if (stage.forwardBackward && !isNonNegativeFinite(*stage.forwardBackward))
      return fail(
          fmt::format("stage @{}: 'forward_backward' must be finite and "
                      "non-negative, got {}",
                      stage.name, *stage.forwardBackward));
    if (stage.fusedBackward && !isNonNegativeFinite(*stage.fusedBackward))
      return fail(fmt::format("stage @{}: 'fused_backward' must be finite and "
                              "non-negative, got {}",
                              stage.name, *stage.fusedBackward));
    for (auto [key, value] : values)
      if (!isNonNegativeFinite(value))
        return fail(fmt::format("stage @{}: '{}' must be finite and "
                                "non-negative, got {}",
                                stage.name, key, value));
    if (stage.recomputed && (!isNonNegativeFinite(*stage.recomputed) ||
                             *stage.recomputed > stage.activation))
      return fail(fmt::format("stage @{}: recomputed ({}) must be finite, "
                              "non-negative and at most activation ({})",
                              stage.name, *stage.recomputed, stage.activation));
    if (stage.weightGrad > stage.activation)
      return fail(fmt::format("stage @{}: weight_grad ({}) exceeds activation "
                              "({})",
                              stage.name, stage.weightGrad, stage.activation));
    if (stage.rank) {
      anyPinned = true;
      if (*stage.rank < 0 || *stage.rank >= problem.ranks)
        return fail(fmt::format("stage @{}: rank({}) is out of range for {} "
                                "ranks",
                                stage.name, *stage.rank, problem.ranks));
    }
  }
  // Every sum the simulator, plans and traces form must stay finite: a cost
  // of 1e308 is finite, its step is not.
  double total = 0.0, memory = 0.0, largest = 0.0;
  std::string largestAt;
  auto note = [&](const Stage &stage, const char *key, double value) {
    if (value > largest) {
      largest = value;
      largestAt = fmt::format("stage @{}'s {}", stage.name, key);
    }
  };
  for (const Stage &stage : problem.stages) {
    double attention = 0.0;
    if (stage.attention) {
      attention = stage.attention->forward + stage.attention->backward;
      memory += stage.attention->memory;
      note(stage, "attention", attention);
    }
    note(stage, "forward", stage.forward);
    note(stage, "backward_input", stage.backwardInput);
    note(stage, "backward_weight", stage.backwardWeight);
    // A recomputing backward runs the forward again.
    total += 2 * stage.forward + stage.backwardInput + stage.backwardWeight +
             attention + 2 * problem.latency;
    memory += stage.activation;
    if (stage.selectiveCost)
      total += *stage.selectiveCost;
  }
  total *= problem.microbatches;
  memory *= problem.microbatches;
  if (!std::isfinite(total) || total > 1e300)
    return fail(fmt::format("the step's time overflows: {} microbatches x the "
                            "costs of {} stages sum to {} (largest: {} = {})",
                            problem.microbatches, problem.numStages(), total,
                            largestAt, largest));
  if (!std::isfinite(memory) || memory > 1e300)
    return fail(fmt::format("the step's memory overflows: {} microbatches x "
                            "the activations of {} stages sum to {}",
                            problem.microbatches, problem.numStages(), memory));
  if (anyPinned && !problem.isPinned())
    return fail("pin every stage with rank(K) or none of them");
  if (anyPinned) {
    std::vector<bool> used(problem.ranks, false);
    for (const Stage &stage : problem.stages)
      used[*stage.rank] = true;
    for (int r = 0; r < problem.ranks; ++r)
      if (!used[r])
        return fail(fmt::format("rank {} hosts no stage", r));
  }
  return llvm::Error::success();
}
