//===- BufferPlan.cpp - Buffers, slots and the runtime plan ---------------===//
//
// Buffer liveness over each rank's instruction order and slot assignment by
// greedy interval colouring (optimal for interval graphs: slots = the most
// buffers live at once); see Plan.h.
//
//===----------------------------------------------------------------------===//

#include "scheduler/lower/Plan.h"
#include "scheduler/model/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

using namespace stagecraft::pipe::sched;

uint64_t stagecraft::pipe::sched::bufferTag(BufferKind kind, int stage,
                                            int microbatch) {
  return (static_cast<uint64_t>(kind) + 1) << 56 |
         static_cast<uint64_t>(stage) << 28 | static_cast<uint64_t>(microbatch);
}

TagParts stagecraft::pipe::sched::decodeTag(uint64_t tag) {
  return {static_cast<int>(tag >> 56) - 1,
          static_cast<int>((tag >> 28) & ((1u << 28) - 1)),
          static_cast<int>(tag & ((1u << 28) - 1))};
}

std::string
stagecraft::pipe::sched::describeTag(uint64_t tag,
                                     llvm::ArrayRef<std::string> stageNames) {
  if (tag == 0)
    return "nothing";
  auto [kind, stage, mb] = decodeTag(tag);
  static const char *names[] = {"act",       "grad",     "stash-i",
                                "stash-w",   "qkv",      "attn",
                                "attn-grad", "qkv-grad", "attn-kept"};
  std::string stageName = stage < static_cast<int>(stageNames.size())
                              ? "@" + stageNames[stage]
                              : "#" + std::to_string(stage);
  if (kind < 0 || kind > 8)
    return fmt::format("garbage 0x{:x}", tag);
  return fmt::format("{}({}, mb {})", names[kind], stageName, mb);
}

namespace {
struct Buffer {
  uint64_t tag;
  int64_t bytes;
  int start;
  int end;
  int slot = -1;
};

BufferKind bufferKindOf(MessageKind kind) {
  switch (kind) {
  case MessageKind::Activation:
    return BufferKind::Activation;
  case MessageKind::Gradient:
    return BufferKind::Gradient;
  case MessageKind::Qkv:
    return BufferKind::Qkv;
  case MessageKind::AttentionOutput:
    return BufferKind::AttentionOutput;
  case MessageKind::AttentionOutputGrad:
    return BufferKind::AttentionOutputGrad;
  case MessageKind::QkvGrad:
    return BufferKind::QkvGrad;
  }
  llvm_unreachable("unknown message kind");
}

uint64_t messageTag(const Message &m) {
  return bufferTag(bufferKindOf(m.kind), m.stage, m.microbatch);
}
} // namespace

Plan stagecraft::pipe::sched::buildPlan(const Problem &problem,
                                        const Program &program,
                                        llvm::StringRef scheduleName,
                                        int64_t unitBytes, BufferStats *stats,
                                        int64_t minMessageBytes) {
  const int p = program.numRanks(), n = problem.numStages();
  Plan plan;
  plan.pipeline = problem.name;
  plan.schedule = scheduleName.str();
  plan.microbatches = problem.microbatches;
  for (const Stage &s : problem.stages) {
    plan.stageNames.push_back(s.name);
    plan.stageLayers.push_back(s.layers);
    plan.stageAttention.push_back(s.attention.has_value());
  }
  if (!problem.isChain())
    for (int s = 0; s < problem.numStages(); ++s)
      plan.stageInputs.push_back(problem.inputsOf(s));
  plan.placement = program.placement;
  plan.recompute = program.recompute;
  plan.links = problem.links;
  plan.lengths = problem.lengths;
  plan.microbatchOrder = problem.microbatchOrder;
  plan.referenceLength = problem.referenceLength;
  plan.ranks.resize(p);
  if (problem.hasDevices())
    for (int r = 0; r < p && r < static_cast<int>(problem.devices.size());
         ++r) {
      plan.ranks[r].device = problem.devices[r].name;
      plan.ranks[r].speed = problem.devices[r].speed;
      plan.ranks[r].memory = std::isfinite(problem.capacityOf(r))
                                 ? std::optional<double>(problem.capacityOf(r))
                                 : std::nullopt;
    }
  if (llvm::Expected<Timeline> t =
          simulate(problem, program.computeSchedule())) {
    plan.simulatedMakespan = t->makespan;
    plan.simulatedSpan = t->maxSpan();
    plan.simulatedBusy = t->busy;
    for (const auto &rank : t->ranks) {
      plan.simulatedStart.emplace_back();
      for (const TimedAction &ta : rank)
        plan.simulatedStart.back().push_back(ta.start);
    }
  } else {
    llvm::consumeError(t.takeError());
  }
  if (stats)
    *stats = BufferStats{};
  auto bytesOf = [&](double units) {
    return std::max<int64_t>(64, static_cast<int64_t>(units * unitBytes));
  };
  // A stage's output message and the gradient that comes back for it are
  // the `output` it declares; without one, the stage's activation (the
  // gradient into stage s is stage s - 1's output). Both ends size a
  // message alike.
  // On a branching pipeline the gradient a stage sends back holds its
  // inputs' outputs together (one message to each input's rank).
  const Problem::Edges edges = problem.edges();
  const std::vector<std::vector<int>> &inputs = edges.inputs,
                                      &consumers = edges.consumers;
  auto messageUnits = [&](BufferKind kind, int s) {
    if (kind == BufferKind::Activation && problem.stages[s].output > 0.0)
      return problem.stages[s].output;
    if (kind == BufferKind::Gradient && problem.gradientUnits(s) > 0.0)
      return problem.gradientUnits(s);
    return problem.stages[s].activation;
  };

  for (int r = 0; r < p; ++r) {
    const std::vector<Instruction> &instrs = program.ranks[r];
    std::vector<Buffer> buffers;
    std::map<uint64_t, int> live; // tag -> buffer index
    auto write = [&](uint64_t tag, double units, int at) {
      live[tag] = static_cast<int>(buffers.size());
      // Every buffer belongs to one microbatch, sized for its length.
      int64_t bytes =
          bytesOf(units * problem.memoryScale(decodeTag(tag).microbatch));
      if (isMessageBuffer(static_cast<BufferKind>(decodeTag(tag).kind)))
        bytes = std::max(bytes, minMessageBytes);
      buffers.push_back({tag, bytes, at, at});
    };
    auto read = [&](uint64_t tag, int at) {
      auto it = live.find(tag);
      assert(it != live.end() && "verified program reads what it has");
      buffers[it->second].end = at;
    };
    // Per instruction: the reads and writes, as tags, for the plan ops.
    std::vector<std::vector<uint64_t>> reads(instrs.size()),
        writes(instrs.size());
    for (int i = 0, e = static_cast<int>(instrs.size()); i < e; ++i) {
      const Instruction &instr = instrs[i];
      auto r_ = [&](uint64_t tag) {
        read(tag, i);
        reads[i].push_back(tag);
      };
      auto w_ = [&](uint64_t tag, double units) {
        write(tag, units, i);
        writes[i].push_back(tag);
      };
      // A stash part of zero size (weight_grad = activation leaves nothing
      // for I to release) needs no buffer.
      auto stash = [&](BufferKind kind, int s, int m, double units) {
        if (units > 0.0)
          w_(bufferTag(kind, s, m), units);
      };
      auto unstash = [&](BufferKind kind, int s, int m) {
        uint64_t tag = bufferTag(kind, s, m);
        if (live.count(tag))
          r_(tag);
      };
      if (instr.kind != Instruction::Kind::Compute) {
        for (const CommOp &op : instr.ops) {
          if (op.isSend)
            r_(messageTag(op.message));
          else
            w_(messageTag(op.message),
               messageUnits(bufferKindOf(op.message.kind), op.message.stage));
        }
        continue;
      }
      const Action &a = instr.action;
      auto attention = [&](int s) {
        return s >= 0 && s < n && problem.stages[s].attention.has_value();
      };
      auto forward = [&](int s, int m) {
        const Stage &stage = problem.stages[s];
        for (int i : inputs[s])
          r_(bufferTag(BufferKind::Activation, i, m));
        if (attention(s - 1))
          r_(bufferTag(BufferKind::AttentionOutput, s - 1, m));
        Recompute mode = program.recompute.at(s, m);
        if (mode == Recompute::None) {
          stash(BufferKind::StashInput, s, m,
                stage.activation - stage.weightGrad);
          stash(BufferKind::StashWeight, s, m, stage.weightGrad);
        } else {
          // Only what the forward keeps; I re-derives the rest and keeps
          // weight_grad of it for W.
          stash(BufferKind::StashInput, s, m, keptActivation(stage, mode));
        }
        if (!consumers[s].empty())
          w_(bufferTag(BufferKind::Activation, s, m),
             messageUnits(BufferKind::Activation, s));
        if (attention(s))
          w_(bufferTag(BufferKind::Qkv, s, m), stage.activation);
      };
      auto inputGrad = [&](int s, int m, bool full) {
        const Stage &stage = problem.stages[s];
        unstash(BufferKind::StashInput, s, m);
        if (full)
          unstash(BufferKind::StashWeight, s, m);
        else if (program.recompute.at(s, m) != Recompute::None)
          stash(BufferKind::StashWeight, s, m, stage.weightGrad);
        for (int c : consumers[s])
          r_(bufferTag(BufferKind::Gradient, c, m));
        if (attention(s))
          r_(bufferTag(BufferKind::QkvGrad, s, m));
        if (!inputs[s].empty())
          w_(bufferTag(BufferKind::Gradient, s, m),
             messageUnits(BufferKind::Gradient, s));
        // A message is sized by the stage it belongs to, on both ends.
        if (attention(s - 1))
          w_(bufferTag(BufferKind::AttentionOutputGrad, s - 1, m),
             problem.stages[s - 1].activation);
      };
      switch (a.kind) {
      case ActionKind::Forward:
        forward(a.stage, a.microbatch);
        break;
      case ActionKind::BackwardInput:
        inputGrad(a.stage, a.microbatch, /*full=*/false);
        break;
      case ActionKind::Backward:
        inputGrad(a.stage, a.microbatch, /*full=*/true);
        break;
      case ActionKind::BackwardWeight:
        unstash(BufferKind::StashWeight, a.stage, a.microbatch);
        break;
      case ActionKind::ForwardBackward:
        forward(a.stage, a.microbatch);
        inputGrad(a.backwardStage, a.backwardMicrobatch, /*full=*/true);
        break;
      case ActionKind::AttentionForward: {
        const Stage &stage = problem.stages[a.stage];
        r_(bufferTag(BufferKind::Qkv, a.stage, a.microbatch));
        stash(BufferKind::AttentionKept, a.stage, a.microbatch,
              stage.attention->memory);
        w_(bufferTag(BufferKind::AttentionOutput, a.stage, a.microbatch),
           stage.activation);
        break;
      }
      case ActionKind::AttentionBackward:
        unstash(BufferKind::AttentionKept, a.stage, a.microbatch);
        r_(bufferTag(BufferKind::AttentionOutputGrad, a.stage, a.microbatch));
        w_(bufferTag(BufferKind::QkvGrad, a.stage, a.microbatch),
           problem.stages[a.stage].activation);
        break;
      }
    }

    // Slots: buffers by start; a slot frees after its buffer's last use.
    std::vector<int> order(buffers.size());
    for (size_t b = 0; b < buffers.size(); ++b)
      order[b] = static_cast<int>(b);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return buffers[a].start < buffers[b].start;
    });
    PlanRank &rank = plan.ranks[r];
    std::vector<int> slotBusyUntil; // last instruction using the slot
    int peakLive = 0;
    int64_t naive = 0;
    for (int b : order) {
      Buffer &buf = buffers[b];
      naive += buf.bytes;
      int best = -1;
      for (int s = 0, e = static_cast<int>(slotBusyUntil.size()); s < e; ++s) {
        if (slotBusyUntil[s] >= buf.start)
          continue;
        // Best fit: the smallest slot that holds it, else the largest.
        auto fits = [&](int x) { return rank.slotBytes[x] >= buf.bytes; };
        if (best < 0 ||
            (fits(s) &&
             (!fits(best) || rank.slotBytes[s] < rank.slotBytes[best])) ||
            (!fits(s) && !fits(best) &&
             rank.slotBytes[s] > rank.slotBytes[best]))
          best = s;
      }
      if (best < 0) {
        best = static_cast<int>(slotBusyUntil.size());
        slotBusyUntil.push_back(-1);
        rank.slotBytes.push_back(0);
      }
      buf.slot = best;
      slotBusyUntil[best] = buf.end;
      rank.slotBytes[best] = std::max(rank.slotBytes[best], buf.bytes);
    }
    // Peak live count, to report beside the slot count.
    std::vector<int> delta(instrs.size() + 1, 0);
    for (const Buffer &buf : buffers) {
      ++delta[buf.start];
      --delta[buf.end + 1];
    }
    for (int i = 0, liveNow = 0; i < static_cast<int>(instrs.size()); ++i)
      peakLive = std::max(peakLive, liveNow += delta[i]);

    // Ops, with a free after each buffer's last use. A verified program
    // creates each tag once per rank, so the tag names its buffer.
    std::vector<std::vector<int>> freesAfter(instrs.size());
    for (size_t b = 0; b < buffers.size(); ++b)
      freesAfter[buffers[b].end].push_back(static_cast<int>(b));
    std::map<uint64_t, int> current;
    for (size_t b = 0; b < buffers.size(); ++b)
      current[buffers[b].tag] = static_cast<int>(b);
    auto use = [&](uint64_t tag) {
      const Buffer &buf = buffers[current[tag]];
      return SlotUse{buf.slot, tag, buf.bytes};
    };
    for (int i = 0, e = static_cast<int>(instrs.size()); i < e; ++i) {
      const Instruction &instr = instrs[i];
      auto commOp = [&](const CommOp &op) {
        PlanOp o;
        o.kind = op.isSend ? PlanOp::Kind::Send : PlanOp::Kind::Recv;
        o.peer = op.peer;
        o.buffer = use(messageTag(op.message));
        // The time the task graph gives the transfer: a stage's gradient
        // message carries its inputs' outputs.
        if (op.isSend && problem.links) {
          BufferKind kind = bufferKindOf(op.message.kind);
          o.transfer =
              kind == BufferKind::Gradient
                  ? problem.transferTimeOfUnits(
                        r, op.peer, problem.gradientUnits(op.message.stage),
                        op.message.microbatch)
                  : problem.transferTime(r, op.peer, op.message.stage,
                                         op.message.microbatch);
        }
        return o;
      };
      if (instr.kind == Instruction::Kind::Compute) {
        PlanOp o;
        o.kind = PlanOp::Kind::Compute;
        o.action = instr.action;
        o.cost = actionEffect(problem, program.recompute, instr.action, r).cost;
        for (uint64_t tag : reads[i])
          o.reads.push_back(use(tag));
        for (uint64_t tag : writes[i])
          o.writes.push_back(use(tag));
        rank.ops.push_back(std::move(o));
      } else if (instr.kind == Instruction::Kind::Comm) {
        rank.ops.push_back(commOp(instr.ops.front()));
      } else {
        PlanOp g;
        g.kind = PlanOp::Kind::Group;
        for (const CommOp &op : instr.ops)
          g.ops.push_back(commOp(op));
        rank.ops.push_back(std::move(g));
      }
      for (int b : freesAfter[i]) {
        PlanOp f;
        f.kind = PlanOp::Kind::Free;
        f.buffer = {buffers[b].slot, buffers[b].tag, buffers[b].bytes};
        rank.ops.push_back(std::move(f));
      }
    }
    if (stats) {
      stats->slots.push_back(static_cast<int>(rank.slotBytes.size()));
      int64_t total = 0;
      for (int64_t bytes : rank.slotBytes)
        total += bytes;
      stats->slotBytes.push_back(total);
      stats->naiveBytes.push_back(naive);
      stats->peakLive.push_back(peakLive);
    }
  }
  return plan;
}
