//===- Program.cpp - Schedules with explicit communication ----------------===//
//
// Communication lowering and the program verifier; see Program.h for the
// semantics both rely on.
//
//===----------------------------------------------------------------------===//

#include "scheduler/lower/Program.h"
#include "scheduler/model/ScheduleError.h"
#include "scheduler/model/Simulator.h"

#include <fmt/format.h>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

using namespace stagecraft::pipe::sched;

/// Messages as hash keys: lowering and verifying 64 ranks x 1024
/// microbatches look up about a million of them.
template <> struct llvm::DenseMapInfo<stagecraft::pipe::sched::Message> {
  using Message = stagecraft::pipe::sched::Message;
  static Message getEmptyKey() {
    return {stagecraft::pipe::sched::MessageKind::Activation, INT_MIN, 0};
  }
  static Message getTombstoneKey() {
    return {stagecraft::pipe::sched::MessageKind::Activation, INT_MIN + 1, 0};
  }
  static unsigned getHashValue(const Message &m) {
    // A 64-bit mix of the three fields (cheaper than hash_combine here).
    uint64_t x = (uint64_t(uint32_t(m.stage)) << 32) | uint32_t(m.microbatch);
    x ^= uint64_t(m.kind) * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    return static_cast<unsigned>(x);
  }
  static bool isEqual(const Message &a, const Message &b) { return a == b; }
};

std::string stagecraft::pipe::sched::describeMessage(const Problem &problem,
                                                     const Message &message) {
  static const char *names[] = {"act",  "grad",      "qkv",
                                "attn", "attn-grad", "qkv-grad"};
  return fmt::format("{}(@{}, mb {})", names[static_cast<int>(message.kind)],
                     problem.stages[message.stage].name, message.microbatch);
}

Schedule Program::computeSchedule() const {
  Schedule schedule;
  schedule.placement = placement;
  schedule.recompute = recompute;
  schedule.ranks.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const Instruction &instr : ranks[r])
      if (instr.kind == Instruction::Kind::Compute)
        schedule.ranks[r].push_back(instr.action);
  return schedule;
}

size_t Program::numTransfers() const {
  size_t n = 0;
  for (const std::vector<Instruction> &rank : ranks)
    for (const Instruction &instr : rank)
      n += instr.ops.size();
  return n;
}

namespace {
/// Where every task runs: stages by placement, attention tasks where the
/// schedule put them.
struct Where {
  llvm::ArrayRef<int> placement;
  std::map<std::pair<int, int>, int> attentionForward, attentionBackward;
  /// The stage graph: each stage's inputs and consumers.
  std::vector<std::vector<int>> inputs, consumers;

  Where(const Problem &problem, llvm::ArrayRef<int> placement)
      : placement(placement) {
    Problem::Edges edges = problem.edges();
    inputs = std::move(edges.inputs);
    consumers = std::move(edges.consumers);
  }
  void note(const Action &a, int rank) {
    if (a.kind == ActionKind::AttentionForward)
      attentionForward[{a.stage, a.microbatch}] = rank;
    if (a.kind == ActionKind::AttentionBackward)
      attentionBackward[{a.stage, a.microbatch}] = rank;
  }
  static int find(const std::map<std::pair<int, int>, int> &m, int s, int mb) {
    auto it = m.find({s, mb});
    return it == m.end() ? -1 : it->second;
  }
  /// The ranks a stage's output goes to (its consumers'), or where its
  /// backward's input gradient goes (its inputs'), without repeats; may
  /// include the stage's own rank.
  llvm::SmallVector<int, 2> targets(const Message &msg) const {
    llvm::SmallVector<int, 2> ranks;
    int s = msg.stage, n = static_cast<int>(placement.size());
    if (s < 0 || s >= n ||
        (msg.kind != MessageKind::Activation &&
         msg.kind != MessageKind::Gradient)) {
      int to = endpoints(msg).second;
      if (to >= 0)
        ranks.push_back(to);
      return ranks;
    }
    for (int t : msg.kind == MessageKind::Activation ? consumers[s] : inputs[s])
      if (!llvm::is_contained(ranks, placement[t]))
        ranks.push_back(placement[t]);
    return ranks;
  }
  /// (from, to) ranks of \p msg; -1 where unknown. For activations and
  /// gradients, `to` is the first of `targets`.
  std::pair<int, int> endpoints(const Message &msg) const {
    int s = msg.stage, m = msg.microbatch,
        n = static_cast<int>(placement.size());
    auto at = [&](int stage) {
      return stage >= 0 && stage < n ? placement[stage] : -1;
    };
    switch (msg.kind) {
    case MessageKind::Activation:
      return {at(s), s >= 0 && s < n && !consumers[s].empty()
                         ? placement[consumers[s].front()]
                         : -1};
    case MessageKind::Gradient:
      return {at(s), s >= 0 && s < n && !inputs[s].empty()
                         ? placement[inputs[s].front()]
                         : -1};
    case MessageKind::Qkv:
      return {at(s), find(attentionForward, s, m)};
    case MessageKind::AttentionOutput:
      return {find(attentionForward, s, m), at(s + 1)};
    case MessageKind::AttentionOutputGrad:
      return {at(s + 1), find(attentionBackward, s, m)};
    case MessageKind::QkvGrad:
      return {find(attentionBackward, s, m), at(s)};
    }
    llvm_unreachable("unknown message kind");
  }
};

/// The (message, peer) pairs an action receives or sends across ranks.
struct Edges {
  llvm::SmallVector<std::pair<Message, int>, 2> inputs, outputs;
};

Edges crossRankEdges(const Problem &problem, const Where &where,
                     const Action &a, int rank) {
  const int n = problem.numStages();
  Edges edges;
  auto in = [&](MessageKind kind, int s, int m) {
    Message msg{kind, s, m};
    int from = where.endpoints(msg).first;
    if (from >= 0 && from != rank)
      edges.inputs.push_back({msg, from});
  };
  auto out = [&](MessageKind kind, int s, int m) {
    Message msg{kind, s, m};
    for (int to : where.targets(msg))
      if (to != rank)
        edges.outputs.push_back({msg, to});
  };
  auto attention = [&](int s) {
    return s >= 0 && s < n && problem.stages[s].attention.has_value();
  };
  auto forwardHalf = [&](int s, int m) {
    for (int i : where.inputs[s])
      in(MessageKind::Activation, i, m);
    if (attention(s - 1))
      in(MessageKind::AttentionOutput, s - 1, m);
    if (!where.consumers[s].empty())
      out(MessageKind::Activation, s, m);
    if (attention(s))
      out(MessageKind::Qkv, s, m);
  };
  auto backwardHalf = [&](int s, int m) {
    for (int c : where.consumers[s])
      in(MessageKind::Gradient, c, m);
    if (attention(s))
      in(MessageKind::QkvGrad, s, m);
    if (!where.inputs[s].empty())
      out(MessageKind::Gradient, s, m);
    if (attention(s - 1))
      out(MessageKind::AttentionOutputGrad, s - 1, m);
  };
  switch (a.kind) {
  case ActionKind::Forward:
    forwardHalf(a.stage, a.microbatch);
    break;
  case ActionKind::BackwardInput:
  case ActionKind::Backward:
    backwardHalf(a.stage, a.microbatch);
    break;
  case ActionKind::BackwardWeight:
    break;
  case ActionKind::ForwardBackward:
    forwardHalf(a.stage, a.microbatch);
    backwardHalf(a.backwardStage, a.backwardMicrobatch);
    break;
  case ActionKind::AttentionForward:
    in(MessageKind::Qkv, a.stage, a.microbatch);
    out(MessageKind::AttentionOutput, a.stage, a.microbatch);
    break;
  case ActionKind::AttentionBackward:
    in(MessageKind::AttentionOutputGrad, a.stage, a.microbatch);
    out(MessageKind::QkvGrad, a.stage, a.microbatch);
    break;
  }
  return edges;
}

Program lower(const Problem &problem, const Schedule &schedule, bool group) {
  const int p = schedule.numRanks();
  Where where(problem, schedule.placement);
  for (int r = 0; r < p; ++r)
    for (const Action &a : schedule.ranks[r])
      where.note(a, r);
  // Per channel (from, to): messages in the order the receiver consumes them
  // (first use: on a branching pipeline two stages of a rank may take the
  // same message).
  std::vector<std::vector<std::vector<Message>>> due(
      p, std::vector<std::vector<Message>>(p));
  for (int r = 0; r < p; ++r) {
    llvm::DenseSet<Message> wanted;
    for (const Action &a : schedule.ranks[r])
      for (auto &[msg, from] : crossRankEdges(problem, where, a, r).inputs)
        if (wanted.insert(msg).second)
          due[from][r].push_back(msg);
  }

  Program program;
  program.placement = schedule.placement;
  program.recompute = schedule.recompute;
  program.ranks.resize(p);
  for (int r = 0; r < p; ++r) {
    llvm::DenseSet<Message> produced, received;
    std::vector<size_t> next(p, 0);
    std::vector<CommOp> pending;
    auto flush = [&] {
      if (pending.empty())
        return;
      bool sends = false, recvs = false;
      for (const CommOp &op : pending)
        (op.isSend ? sends : recvs) = true;
      if (group && sends && recvs) {
        program.ranks[r].push_back(Instruction::group(std::move(pending)));
      } else {
        for (const CommOp &op : pending)
          program.ranks[r].push_back(Instruction::comm(op));
      }
      pending.clear();
    };
    for (const Action &a : schedule.ranks[r]) {
      Edges edges = crossRankEdges(problem, where, a, r);
      for (auto &[msg, from] : edges.inputs)
        if (received.insert(msg).second)
          pending.push_back({false, from, msg});
      flush();
      program.ranks[r].push_back(Instruction::compute(a));
      // A channel can move on only when this action produced the message
      // it waits for: look at the ranks it sends to, in rank order.
      llvm::SmallVector<int, 4> peers;
      for (auto &[msg, to] : edges.outputs) {
        produced.insert(msg);
        peers.push_back(to);
      }
      llvm::sort(peers);
      peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
      for (int to : peers)
        while (next[to] < due[r][to].size() &&
               produced.count(due[r][to][next[to]]))
          pending.push_back({true, to, due[r][to][next[to]++]});
    }
    flush();
  }
  return program;
}
} // namespace

Program stagecraft::pipe::sched::lowerCommunication(const Problem &problem,
                                                    const Schedule &schedule) {
  Program grouped = lower(problem, schedule, /*group=*/true);
  if (llvm::Error err = verifyProgram(problem, grouped)) {
    llvm::consumeError(std::move(err));
    return lower(problem, schedule, /*group=*/false);
  }
  return grouped;
}

Program stagecraft::pipe::sched::lowerCommunicationEarlyReceives(
    const Problem &problem, const Schedule &schedule, const Timeline *known,
    bool verified) {
  llvm::Expected<Timeline> simulated =
      known ? llvm::Expected<Timeline>(Timeline())
            : simulate(problem, schedule);
  if (!simulated) {
    llvm::consumeError(simulated.takeError());
    return lowerCommunication(problem, schedule);
  }
  const Timeline *timeline = known ? known : &*simulated;
  Program plain = lower(problem, schedule, /*group=*/false);
  const int p = plain.numRanks();
  // Start and end of each rank's computes, in program order.
  std::vector<std::vector<std::pair<double, double>>> times(p);
  for (int r = 0; r < p; ++r) {
    const std::vector<TimedAction> &row = timeline->ranks[r];
    if (row.size() != schedule.ranks[r].size())
      return lowerCommunication(problem, schedule);
    for (size_t i = 0; i < row.size(); ++i) {
      if (!(row[i].action == schedule.ranks[r][i]))
        return lowerCommunication(problem, schedule);
      times[r].push_back({row[i].start, row[i].end});
    }
  }
  // When each send goes out: at the end of the compute before it.
  llvm::DenseMap<Message, double> sent;
  sent.reserve(plain.numTransfers());
  for (int r = 0; r < p; ++r) {
    int computes = 0;
    for (const Instruction &instr : plain.ranks[r]) {
      if (instr.kind == Instruction::Kind::Compute) {
        ++computes;
        continue;
      }
      for (const CommOp &op : instr.ops)
        if (op.isSend)
          sent[op.message] = computes ? times[r][computes - 1].second : 0.0;
    }
  }
  Program early;
  early.placement = plain.placement;
  early.recompute = plain.recompute;
  early.ranks.resize(p);
  for (int r = 0; r < p; ++r) {
    // Each receive's new place: before compute `at`, no later than where it
    // was and no earlier than the previous receive on its channel.
    struct Moved {
      int at;
      size_t order;
      CommOp op;
    };
    std::vector<Moved> moved;
    std::vector<int> channelFloor(p, 0);
    int computes = 0;
    for (const Instruction &instr : plain.ranks[r]) {
      if (instr.kind == Instruction::Kind::Compute) {
        ++computes;
        continue;
      }
      for (const CommOp &op : instr.ops) {
        if (op.isSend)
          continue;
        auto found = sent.find(op.message);
        double ready = found != sent.end() ? found->second : 0.0;
        // The first of the computes so far that starts at or after `ready`
        // (a rank's computes start in program order): a binary search, so
        // that 64 ranks x 1024 microbatches lower in a fraction of a second.
        auto begin = times[r].begin();
        int at = static_cast<int>(
            std::partition_point(begin, begin + computes,
                                 [&](const std::pair<double, double> &t) {
                                   return t.first < ready;
                                 }) -
            begin);
        at = std::max(at, channelFloor[op.peer]);
        channelFloor[op.peer] = at;
        moved.push_back({at, moved.size(), op});
      }
    }
    std::stable_sort(
        moved.begin(), moved.end(),
        [](const Moved &a, const Moved &b) { return a.at < b.at; });
    size_t next = 0;
    int compute = 0;
    for (const Instruction &instr : plain.ranks[r]) {
      if (instr.kind == Instruction::Kind::Compute) {
        while (next < moved.size() && moved[next].at <= compute)
          early.ranks[r].push_back(Instruction::comm(moved[next++].op));
        early.ranks[r].push_back(instr);
        ++compute;
        continue;
      }
      for (const CommOp &op : instr.ops)
        if (op.isSend)
          early.ranks[r].push_back(Instruction::comm(op));
    }
    while (next < moved.size())
      early.ranks[r].push_back(Instruction::comm(moved[next++].op));
  }
  if (llvm::Error err =
          verifyProgram(problem, early, verified ? &schedule : nullptr)) {
    llvm::consumeError(std::move(err));
    return lowerCommunication(problem, schedule);
  }
  return early;
}

llvm::Error
stagecraft::pipe::sched::verifyProgram(const Problem &problem,
                                       const Program &program,
                                       const Schedule *verifiedCompute) {
  const int p = program.numRanks();
  Schedule compute = program.computeSchedule();
  const bool known = verifiedCompute &&
                     compute.placement == verifiedCompute->placement &&
                     compute.recompute == verifiedCompute->recompute &&
                     compute.ranks == verifiedCompute->ranks;
  // Compute-level sites index actions; map them to instruction indices.
  std::vector<std::vector<int>> computeAt(p);
  for (int r = 0; r < p && r < static_cast<int>(program.ranks.size()); ++r)
    for (int i = 0, e = static_cast<int>(program.ranks[r].size()); i < e; ++i)
      if (program.ranks[r][i].kind == Instruction::Kind::Compute)
        computeAt[r].push_back(i);
  auto remap = [&](ScheduleSite site) {
    if (site.rank >= 0 && site.index >= 0 &&
        site.index < static_cast<int>(computeAt[site.rank].size()))
      site.index = computeAt[site.rank][site.index];
    return site;
  };
  if (llvm::Error err =
          known ? llvm::Error::success() : verifySchedule(problem, compute))
    return llvm::handleErrors(
        std::move(err), [&](std::unique_ptr<ScheduleError> e) -> llvm::Error {
          e->site = remap(e->site);
          for (ScheduleNote &note : e->notes)
            note.site = remap(note.site);
          return llvm::Error(std::move(e));
        });

  Where where(problem, program.placement);
  for (int r = 0; r < p; ++r)
    for (const Instruction &instr : program.ranks[r])
      if (instr.kind == Instruction::Kind::Compute)
        where.note(instr.action, r);
  // Structure: what each rank holds, sends and receives.
  struct Posted {
    int instr;
    Message message;
  };
  std::vector<std::vector<std::vector<Posted>>> sends(
      p, std::vector<std::vector<Posted>>(p)),
      recvs(p, std::vector<std::vector<Posted>>(p));
  // Messages indexed densely by (kind, stage, microbatch): the rank that
  // last produced and last received each (ranks are walked in turn, so
  // "this rank has" is "its stamp is this rank"), and a bit per channel it
  // went over: (its receiver's place among the message's targets, send or
  // receive). A fan-out wider than 4 targets keeps its channels in `wide`.
  const size_t numMessages = (static_cast<size_t>(MessageKind::QkvGrad) + 1) *
                             problem.numStages() * problem.microbatches;
  auto indexOf = [&](const Message &m) {
    return (static_cast<size_t>(m.kind) * problem.numStages() + m.stage) *
               problem.microbatches +
           m.microbatch;
  };
  std::vector<int> producedOn(numMessages, -1), receivedOn(numMessages, -1);
  std::vector<uint8_t> channels(numMessages, 0);
  llvm::DenseSet<std::pair<Message, int>> wide;
  for (int r = 0; r < p; ++r) {
    for (int i = 0, e = static_cast<int>(program.ranks[r].size()); i < e; ++i) {
      const Instruction &instr = program.ranks[r][i];
      ScheduleSite site{r, i};
      if (instr.kind == Instruction::Kind::Compute) {
        Edges edges = crossRankEdges(problem, where, instr.action, r);
        for (auto &[msg, from] : edges.inputs)
          if (receivedOn[indexOf(msg)] != r)
            return scheduleError(
                fmt::format("{} needs {} from rank {}, which rank {} has not "
                            "received before it",
                            describeAction(problem, instr.action),
                            describeMessage(problem, msg), from, r),
                site);
        for (auto &[msg, to] : edges.outputs)
          producedOn[indexOf(msg)] = r;
        continue;
      }
      for (const CommOp &op : instr.ops) {
        if (op.peer < 0 || op.peer >= p || op.peer == r)
          return scheduleError(fmt::format("{} names peer rank {}",
                                           op.isSend ? "send" : "recv",
                                           op.peer),
                               site);
        const Message &msg = op.message;
        const bool valid = msg.stage >= 0 && msg.stage < problem.numStages() &&
                           msg.microbatch >= 0 &&
                           msg.microbatch < problem.microbatches;
        int source = valid ? where.endpoints(msg).first : -1;
        llvm::SmallVector<int, 2> targets;
        if (valid)
          targets = where.targets(msg);
        if (source < 0 || targets.empty())
          return scheduleError(
              fmt::format("{} is not a message of pipeline @{}",
                          describeMessage(problem, msg), problem.name),
              site);
        int from = op.isSend ? r : op.peer, to = op.isSend ? op.peer : r;
        if (source != from || !llvm::is_contained(targets, to)) {
          std::string dests;
          for (int t : targets)
            dests += (dests.empty() ? "" : " or ") + std::to_string(t);
          return scheduleError(
              fmt::format("{} {} rank {}, but it goes from rank {} to rank {}",
                          describeMessage(problem, msg),
                          op.isSend ? "is sent to" : "is received from",
                          op.peer, source, dests),
              site);
        }
        // A message goes once over each channel (a fan-out sends it to
        // several ranks).
        const size_t index = indexOf(msg);
        const auto slot = llvm::find(targets, to) - targets.begin();
        bool twice;
        if (slot < 4) {
          const uint8_t bit = 1u << (2 * slot + (op.isSend ? 1 : 0));
          twice = channels[index] & bit;
          channels[index] |= bit;
        } else {
          twice = !wide.insert({msg, 2 * to + (op.isSend ? 1 : 0)}).second;
        }
        if (twice)
          return scheduleError(
              fmt::format("{} {} twice", describeMessage(problem, msg),
                          op.isSend ? "is sent" : "is received"),
              site);
        if (op.isSend) {
          if (producedOn[index] != r)
            return scheduleError(
                fmt::format("rank {} sends {} before computing it", r,
                            describeMessage(problem, msg)),
                site);
          sends[r][op.peer].push_back({i, msg});
        } else {
          receivedOn[index] = r;
          recvs[op.peer][r].push_back({i, msg});
        }
      }
    }
  }
  // Every message a compute needs was received (checked above) and so must
  // have been sent; channel order must pair each send with its receive.
  for (int a = 0; a < p; ++a)
    for (int b = 0; b < p; ++b) {
      const auto &s = sends[a][b];
      const auto &v = recvs[a][b];
      for (size_t k = 0; k < std::max(s.size(), v.size()); ++k) {
        if (k >= s.size())
          return scheduleError(
              fmt::format("rank {} receives {} from rank {}, which never sends "
                          "it",
                          b, describeMessage(problem, v[k].message), a),
              {b, v[k].instr});
        if (k >= v.size())
          return scheduleError(
              fmt::format(
                  "rank {} sends {} to rank {}, which never receives it", a,
                  describeMessage(problem, s[k].message), b),
              {a, s[k].instr});
        if (!(s[k].message == v[k].message))
          return scheduleError(
              fmt::format("channel {} -> {}: send #{} carries {} but the "
                          "receive it is matched with expects {}",
                          a, b, k, describeMessage(problem, s[k].message),
                          describeMessage(problem, v[k].message)),
              {a, s[k].instr}, {{{b, v[k].instr}, "the matched receive"}});
      }
    }

  // Execution. An op is posted once its rank reached its instruction.
  // partner[r][i][j]: (rank, instruction) of the op matched with op j.
  std::vector<std::vector<std::vector<std::pair<int, int>>>> partner(p);
  for (int r = 0; r < p; ++r) {
    partner[r].resize(program.ranks[r].size());
    std::vector<size_t> sendK(p, 0), recvK(p, 0);
    for (size_t i = 0; i < program.ranks[r].size(); ++i)
      for (const CommOp &op : program.ranks[r][i].ops)
        partner[r][i].push_back(
            op.isSend
                ? std::make_pair(op.peer,
                                 recvs[r][op.peer][sendK[op.peer]++].instr)
                : std::make_pair(op.peer,
                                 sends[op.peer][r][recvK[op.peer]++].instr));
  }
  std::vector<int> pc(p, 0);
  auto blockedOn = [&](int r) -> int { // -1: can advance
    const Instruction &instr = program.ranks[r][pc[r]];
    if (instr.kind == Instruction::Kind::Compute)
      return -1;
    for (size_t j = 0; j < instr.ops.size(); ++j) {
      const CommOp &op = instr.ops[j];
      if (instr.kind == Instruction::Kind::Comm && op.isSend)
        return -1; // asynchronous
      auto [peer, at] = partner[r][pc[r]][j];
      if (pc[peer] < at)
        return static_cast<int>(j);
    }
    return -1;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p; ++r)
      while (pc[r] < static_cast<int>(program.ranks[r].size()) &&
             blockedOn(r) < 0) {
        ++pc[r];
        progress = true;
      }
  }
  std::vector<int> stuck;
  for (int r = 0; r < p; ++r)
    if (pc[r] < static_cast<int>(program.ranks[r].size()))
      stuck.push_back(r);
  if (stuck.empty())
    return llvm::Error::success();

  // Follow the waits from the first stuck rank to a cycle.
  auto waitsFor = [&](int r) { return partner[r][pc[r]][blockedOn(r)].first; };
  std::vector<int> path, index(p, -1);
  int r = stuck.front();
  while (index[r] < 0 && pc[r] < static_cast<int>(program.ranks[r].size())) {
    index[r] = static_cast<int>(path.size());
    path.push_back(r);
    r = waitsFor(r);
  }
  std::string cycle;
  if (index[r] >= 0) {
    for (size_t k = index[r]; k < path.size(); ++k)
      cycle += std::to_string(path[k]) + " -> ";
    cycle += std::to_string(r);
  }
  std::vector<ScheduleNote> notes;
  for (int s : stuck) {
    const Instruction &instr = program.ranks[s][pc[s]];
    const CommOp &op = instr.ops[blockedOn(s)];
    auto [peer, at] = partner[s][pc[s]][blockedOn(s)];
    notes.push_back(
        {{s, pc[s]},
         fmt::format("rank {} waits at {} {} {} rank {} (instruction {}{}), "
                     "matched by instruction {} of rank {}, which is at "
                     "instruction {}",
                     s, op.isSend ? "send" : "recv",
                     describeMessage(problem, op.message),
                     op.isSend ? "to" : "from", op.peer, pc[s],
                     instr.kind == Instruction::Kind::Group ? ", in a group"
                                                            : "",
                     at, peer, pc[peer])});
  }
  std::string ranks;
  for (int s : stuck)
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(s);
  return scheduleError(
      fmt::format("communication deadlocks: ranks {} wait forever{}", ranks,
                  cycle.empty() ? "" : "; cycle " + cycle),
      {}, std::move(notes));
}
