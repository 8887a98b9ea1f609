//===- PlanFile.cpp - Versioned JSON form of the runtime plan -------------===//
//
// `{"format": "stagecraft-plan", "version": 1, ...}`: writer and a reader
// that checks everything the executor relies on before anything runs.
//
//===----------------------------------------------------------------------===//

#include "scheduler/lower/Plan.h"
#include "scheduler/model/Nesting.h"
#include "scheduler/model/Simulator.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

using namespace stagecraft::pipe::sched;
namespace json = llvm::json;

static const char *opName(PlanOp::Kind kind) {
  switch (kind) {
  case PlanOp::Kind::Compute:
    return "compute";
  case PlanOp::Kind::Send:
    return "send";
  case PlanOp::Kind::Recv:
    return "recv";
  case PlanOp::Kind::Group:
    return "group";
  case PlanOp::Kind::Free:
    return "free";
  case PlanOp::Kind::Reduce:
    return "reduce";
  case PlanOp::Kind::ReduceWait:
    return "reduce-wait";
  }
  llvm_unreachable("unknown op");
}

static void writeOp(json::OStream &j, const PlanOp &op) {
  j.object([&] {
    j.attribute("op", opName(op.kind));
    switch (op.kind) {
    case PlanOp::Kind::Compute: {
      const Action &a = op.action;
      j.attribute("kind", std::string(1, actionLetter(a.kind)));
      j.attribute("stage", a.stage);
      j.attribute("mb", a.microbatch);
      if (a.kind == ActionKind::ForwardBackward) {
        j.attribute("bstage", a.backwardStage);
        j.attribute("bmb", a.backwardMicrobatch);
      }
      j.attribute("cost", op.cost);
      auto uses = [&](const char *key, const std::vector<SlotUse> &v) {
        j.attributeArray(key, [&] {
          for (const SlotUse &u : v)
            j.array([&] {
              j.value(u.slot);
              j.value(static_cast<int64_t>(u.tag));
              j.value(u.bytes);
            });
        });
      };
      uses("reads", op.reads);
      uses("writes", op.writes);
      break;
    }
    case PlanOp::Kind::Send:
    case PlanOp::Kind::Recv:
      j.attribute("peer", op.peer);
      [[fallthrough]];
    case PlanOp::Kind::Free:
      j.attribute("slot", op.buffer.slot);
      j.attribute("tag", static_cast<int64_t>(op.buffer.tag));
      j.attribute("bytes", op.buffer.bytes);
      if (op.transfer > 0.0)
        j.attribute("transfer", op.transfer);
      break;
    case PlanOp::Kind::Group:
      j.attributeArray("ops", [&] {
        for (const PlanOp &sub : op.ops)
          writeOp(j, sub);
      });
      break;
    case PlanOp::Kind::Reduce:
    case PlanOp::Kind::ReduceWait:
      j.attribute("stage", op.stage);
      break;
    }
  });
}

std::string stagecraft::pipe::sched::writePlan(const Plan &plan) {
  std::string out;
  llvm::raw_string_ostream os(out);
  json::OStream j(os);
  j.object([&] {
    j.attribute("format", "stagecraft-plan");
    j.attribute("version", Plan::kVersion);
    j.attribute("pipeline", plan.pipeline);
    j.attribute("schedule", plan.schedule);
    j.attribute("objective", plan.objective);
    j.attribute("microbatches", plan.microbatches);
    j.attributeArray("stages", [&] {
      for (const std::string &s : plan.stageNames)
        j.value(s);
    });
    j.attributeArray("layers", [&] {
      for (int l : plan.stageLayers)
        j.value(l);
    });
    // One string per stage, a letter per microbatch: n none, f full,
    // s selective; an empty array when nothing recomputes.
    j.attributeArray("recompute", [&] {
      if (!plan.recompute.any())
        return;
      for (size_t s = 0; s < plan.stageNames.size(); ++s) {
        std::string row;
        for (int m = 0; m < plan.microbatches; ++m)
          row += "nfs"[static_cast<int>(plan.recompute.at(s, m))];
        j.value(row);
      }
    });
    j.attributeArray("attention", [&] {
      for (bool a : plan.stageAttention)
        j.value(a);
    });
    j.attributeArray("placement", [&] {
      for (int r : plan.placement)
        j.value(r);
    });
    // A branching pipeline: per stage, the stages it takes outputs from.
    if (!plan.stageInputs.empty())
      j.attributeArray("inputs", [&] {
        for (const std::vector<int> &in : plan.stageInputs)
          j.array([&] {
            for (int i : in)
              j.value(i);
          });
      });
    if (plan.links) {
      auto link = [&](const char *name, const Problem::Link &l) {
        j.attributeObject(name, [&] {
          j.attribute("latency", l.latency);
          j.attribute("bandwidth", l.bandwidth);
        });
      };
      j.attributeObject("links", [&] {
        j.attribute("node", plan.links->node);
        link("intra", plan.links->intra);
        link("inter", plan.links->inter);
      });
    }
    if (!plan.lengths.empty()) {
      j.attributeArray("lengths", [&] {
        for (double l : plan.lengths)
          j.value(l);
      });
      j.attribute("reference_length", plan.referenceLength);
    }
    if (plan.dataParallel > 1)
      j.attributeObject("data_parallel", [&] {
        j.attribute("degree", plan.dataParallel);
        j.attribute("sharding", plan.sharding);
      });
    if (!plan.microbatchOrder.empty())
      j.attributeArray("microbatch_order", [&] {
        for (int k : plan.microbatchOrder)
          j.value(k);
      });
    j.attribute("simulated_makespan", plan.simulatedMakespan);
    j.attribute("simulated_span", plan.simulatedSpan);
    j.attributeArray("simulated_busy", [&] {
      for (double b : plan.simulatedBusy)
        j.value(b);
    });
    j.attributeArray("simulated_start", [&] {
      for (const auto &rank : plan.simulatedStart)
        j.array([&] {
          for (double t : rank)
            j.value(t);
        });
    });
    j.attributeArray("ranks", [&] {
      for (const PlanRank &rank : plan.ranks)
        j.object([&] {
          if (!rank.device.empty())
            j.attributeObject("device", [&] {
              j.attribute("name", rank.device);
              j.attribute("speed", rank.speed);
              if (rank.memory)
                j.attribute("memory", *rank.memory);
            });
          j.attributeArray("slots", [&] {
            for (int64_t bytes : rank.slotBytes)
              j.value(bytes);
          });
          j.attributeArray("ops", [&] {
            for (const PlanOp &op : rank.ops)
              writeOp(j, op);
          });
        });
    });
    if (!plan.fallbacks.empty())
      j.attributeArray("fallbacks", [&] {
        for (const Plan &fallback : plan.fallbacks)
          j.rawValue(llvm::StringRef(writePlan(fallback)).rtrim());
      });
  });
  os << "\n";
  return out;
}

namespace {
class Reader {
public:
  llvm::Error fail(const std::string &where, const std::string &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid plan: " + where + ": " + what);
  }

  llvm::Expected<PlanOp> op(const json::Value &v, const std::string &where,
                            int numRanks, int rank,
                            llvm::ArrayRef<int64_t> slotBytes, bool inGroup) {
    const int slots = static_cast<int>(slotBytes.size());
    const json::Object *o = v.getAsObject();
    if (!o)
      return fail(where, "expected an object");
    std::optional<llvm::StringRef> name = o->getString("op");
    if (!name)
      return fail(where, "missing \"op\"");
    PlanOp result;
    auto integer = [&](llvm::StringRef key, int64_t lo,
                       int64_t hi) -> llvm::Expected<int64_t> {
      std::optional<int64_t> x = o->getInteger(key);
      if (!x)
        return fail(where, fmt::format("missing integer \"{}\"", key.str()));
      if (*x < lo || *x > hi)
        return fail(where, fmt::format("\"{}\" = {} is out of range [{}, {}]",
                                       key.str(), *x, lo, hi));
      return *x;
    };
    auto checkUse = [&](int64_t slot, int64_t bytes) -> llvm::Error {
      if (slot < 0 || slot >= slots)
        return fail(where, fmt::format("slot {} is out of range: rank {} has "
                                       "{} slots",
                                       slot, rank, slots));
      if (bytes < 8 || bytes > slotBytes[slot])
        return fail(where, fmt::format("a {}-byte buffer does not fit slot {} "
                                       "({} bytes)",
                                       bytes, slot, slotBytes[slot]));
      return llvm::Error::success();
    };
    auto slotUse = [&](const json::Value &u) -> llvm::Expected<SlotUse> {
      const json::Array *t = u.getAsArray();
      if (!t || t->size() != 3 || !(*t)[0].getAsInteger() ||
          !(*t)[1].getAsInteger() || !(*t)[2].getAsInteger())
        return fail(where, "expected [slot, tag, bytes]");
      int64_t slot = *(*t)[0].getAsInteger(), bytes = *(*t)[2].getAsInteger();
      if (llvm::Error err = checkUse(slot, bytes))
        return std::move(err);
      return SlotUse{static_cast<int>(slot),
                     static_cast<uint64_t>(*(*t)[1].getAsInteger()), bytes};
    };
    if (*name == "compute") {
      if (inGroup)
        return fail(where, "a group holds only send and recv");
      result.kind = PlanOp::Kind::Compute;
      std::optional<llvm::StringRef> kind = o->getString("kind");
      std::optional<ActionKind> k;
      if (kind && kind->size() == 1)
        switch (kind->front()) {
        case 'X':
          k = ActionKind::ForwardBackward;
          break;
        case 'A':
          k = ActionKind::AttentionForward;
          break;
        case 'G':
          k = ActionKind::AttentionBackward;
          break;
        default:
          k = actionKindFromLetter(kind->front());
        }
      if (!k)
        return fail(where, "\"kind\" must be one of F, I, W, B, X, A, G");
      result.action.kind = *k;
      auto stage = integer("stage", 0, stages - 1);
      auto mb = integer("mb", 0, microbatches - 1);
      if (!stage)
        return stage.takeError();
      if (!mb)
        return mb.takeError();
      result.action.stage = static_cast<int>(*stage);
      result.action.microbatch = static_cast<int>(*mb);
      if (*k == ActionKind::ForwardBackward) {
        auto bs = integer("bstage", 0, stages - 1);
        auto bm = integer("bmb", 0, microbatches - 1);
        if (!bs)
          return bs.takeError();
        if (!bm)
          return bm.takeError();
        result.action.backwardStage = static_cast<int>(*bs);
        result.action.backwardMicrobatch = static_cast<int>(*bm);
      }
      std::optional<double> cost = o->getNumber("cost");
      if (!cost || !std::isfinite(*cost) || *cost < 0)
        return fail(where, "\"cost\" must be a finite non-negative number");
      result.cost = *cost;
      for (const char *key : {"reads", "writes"}) {
        const json::Array *uses = o->getArray(key);
        if (!uses)
          return fail(where, fmt::format("missing array \"{}\"", key));
        for (const json::Value &u : *uses) {
          llvm::Expected<SlotUse> use = slotUse(u);
          if (!use)
            return use.takeError();
          (std::string(key) == "reads" ? result.reads : result.writes)
              .push_back(*use);
        }
      }
      return result;
    }
    if (*name == "send" || *name == "recv" || *name == "free") {
      result.kind = *name == "send"   ? PlanOp::Kind::Send
                    : *name == "recv" ? PlanOp::Kind::Recv
                                      : PlanOp::Kind::Free;
      if (result.kind != PlanOp::Kind::Free) {
        auto peer = integer("peer", 0, numRanks - 1);
        if (!peer)
          return peer.takeError();
        if (*peer == rank)
          return fail(where, "a rank cannot send to or receive from itself");
        result.peer = static_cast<int>(*peer);
      } else if (inGroup) {
        return fail(where, "a group holds only send and recv");
      }
      std::optional<int64_t> slot = o->getInteger("slot");
      std::optional<int64_t> tag = o->getInteger("tag");
      std::optional<int64_t> bytes = o->getInteger("bytes");
      if (!slot || !tag || !bytes)
        return fail(where, "needs integers \"slot\", \"tag\" and \"bytes\"");
      if (llvm::Error err = checkUse(*slot, *bytes))
        return std::move(err);
      result.buffer = {static_cast<int>(*slot), static_cast<uint64_t>(*tag),
                       *bytes};
      if (const json::Value *transfer = o->get("transfer")) {
        std::optional<double> t = transfer->getAsNumber();
        if (result.kind != PlanOp::Kind::Send || !t || !std::isfinite(*t) ||
            *t < 0.0)
          return fail(where, "\"transfer\" is a finite time >= 0 on a send");
        result.transfer = *t;
      }
      return result;
    }
    if (*name == "reduce" || *name == "reduce-wait") {
      if (inGroup)
        return fail(where, "a group holds only send and recv");
      result.kind =
          *name == "reduce" ? PlanOp::Kind::Reduce : PlanOp::Kind::ReduceWait;
      auto stage = integer("stage", 0, stages - 1);
      if (!stage)
        return stage.takeError();
      result.stage = static_cast<int>(*stage);
      return result;
    }
    if (*name == "group") {
      if (inGroup)
        return fail(where, "groups do not nest");
      result.kind = PlanOp::Kind::Group;
      const json::Array *ops = o->getArray("ops");
      if (!ops || ops->empty())
        return fail(where, "a group needs a non-empty \"ops\" array");
      for (size_t k = 0; k < ops->size(); ++k) {
        llvm::Expected<PlanOp> sub =
            op((*ops)[k], where + fmt::format(", group op {}", k), numRanks,
               rank, slotBytes, /*inGroup=*/true);
        if (!sub)
          return sub.takeError();
        result.ops.push_back(std::move(*sub));
      }
      return result;
    }
    return fail(where, fmt::format("unknown op \"{}\"", name->str()));
  }

  int stages = 0;
  int microbatches = 0;
};
} // namespace

/// The plan's computes must be a schedule of its own pipeline: every rank
/// hosts a stage, every (stage, microbatch) has its F and its B (or I and W)
/// exactly once on the rank `placement` names, and the per-rank orders can
/// run. The task graph and the simulator say so, as for any schedule.
static llvm::Error checkComputes(const Plan &plan) {
  Problem problem;
  problem.name = plan.pipeline;
  problem.ranks = plan.numRanks();
  problem.microbatches = plan.microbatches;
  std::vector<bool> hosts(plan.numRanks(), false);
  for (size_t s = 0; s < plan.stageNames.size(); ++s) {
    Stage stage;
    stage.name = plan.stageNames[s];
    if (plan.stageAttention[s])
      stage.attention = Stage::Attention{};
    if (!plan.stageInputs.empty())
      stage.inputs = plan.stageInputs[s];
    // The plan's recompute letters were checked against the spec when it
    // was written; this check is about order, so any level is allowed.
    stage.selective = 0.0;
    stage.selectiveCost = 0.0;
    problem.stages.push_back(stage);
    hosts[plan.placement[s]] = true;
  }
  for (int r = 0; r < plan.numRanks(); ++r)
    if (!hosts[r])
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format(
              "rank {} hosts no stage (placement names ranks up to "
              "{} of the {} in \"ranks\")",
              r,
              *std::max_element(plan.placement.begin(), plan.placement.end()),
              plan.numRanks()));
  Schedule schedule = plan.computeSchedule();
  if (llvm::Error err = validateProblem(problem))
    return err;
  return verifySchedule(problem, schedule);
}

static llvm::Expected<Plan> readPlanObject(const json::Object *root);

llvm::Expected<Plan> stagecraft::pipe::sched::readPlan(llvm::StringRef text) {
  Reader reader;
  // llvm::json recurses per bracket: refuse deep nesting before it does.
  if (std::optional<DeepNesting> deep =
          findDeepNesting(text, /*mlirSyntax=*/false))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("invalid plan: line {}, column {}: brackets nested "
                    "deeper than {}",
                    deep->line, deep->column, kMaxNesting));
  llvm::Expected<json::Value> doc = json::parse(text);
  if (!doc)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid plan: not JSON (truncated?): " +
                                       llvm::toString(doc.takeError()));
  const json::Object *root = doc->getAsObject();
  llvm::Expected<Plan> plan = readPlanObject(root);
  if (!plan)
    return plan.takeError();
  const json::Value *fallbacks = root->get("fallbacks");
  if (!fallbacks)
    return plan;
  const json::Array *list = fallbacks->getAsArray();
  if (!list)
    return reader.fail("fallbacks", "must be an array of plans");
  for (size_t k = 0; k < list->size(); ++k) {
    const std::string where = fmt::format("fallbacks[{}]", k);
    const json::Object *object = (*list)[k].getAsObject();
    if (object && object->get("fallbacks"))
      return reader.fail(where, "a fallback plan holds no fallbacks of its "
                                "own");
    llvm::Expected<Plan> fallback = readPlanObject(object);
    if (!fallback)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     where + ": " +
                                         llvm::toString(fallback.takeError()));
    if (fallback->pipeline != plan->pipeline ||
        fallback->stageNames != plan->stageNames ||
        fallback->microbatches != plan->microbatches ||
        fallback->stageLayers != plan->stageLayers)
      return reader.fail(where, "must run the same pipeline (stages, layers "
                                "and microbatches) as the plan");
    if (fallback->numRanks() >= plan->numRanks())
      return reader.fail(where,
                         fmt::format("runs on {} ranks; a fallback is for "
                                     "fewer than the plan's {}",
                                     fallback->numRanks(), plan->numRanks()));
    for (const Plan &other : plan->fallbacks)
      if (other.numRanks() == fallback->numRanks())
        return reader.fail(where, fmt::format("a second fallback for {} ranks",
                                              fallback->numRanks()));
    plan->fallbacks.push_back(std::move(*fallback));
  }
  return plan;
}

/// One plan object (a file's top level, or one of its fallbacks).
static llvm::Expected<Plan> readPlanObject(const json::Object *root) {
  Reader reader;
  if (!root || root->getString("format") != "stagecraft-plan")
    return reader.fail("top level", "not a stagecraft plan (\"format\" must be "
                                    "\"stagecraft-plan\")");
  std::optional<int64_t> version = root->getInteger("version");
  if (!version || *version != Plan::kVersion)
    return reader.fail("top level",
                       fmt::format("unsupported version {}; this runtime reads "
                                   "version {}",
                                   version ? std::to_string(*version) : "none",
                                   Plan::kVersion));
  Plan plan;
  plan.pipeline = root->getString("pipeline").value_or("").str();
  plan.schedule = root->getString("schedule").value_or("").str();
  // Plans written before the objective was recorded: the makespan's.
  plan.objective = root->getString("objective").value_or("makespan").str();
  if (plan.objective != "makespan" && plan.objective != "span")
    return reader.fail("objective", "must be \"makespan\" or \"span\", not "
                                    "\"" +
                                        plan.objective + "\"");
  std::optional<int64_t> mbs = root->getInteger("microbatches");
  const json::Array *stages = root->getArray("stages");
  const json::Array *placement = root->getArray("placement");
  const json::Array *ranks = root->getArray("ranks");
  if (!mbs || *mbs < 1 || !stages || stages->empty() || !placement ||
      placement->size() != stages->size() || !ranks || ranks->empty())
    return reader.fail("top level", "needs microbatches >= 1, non-empty "
                                    "\"stages\", \"placement\" of the same "
                                    "length and non-empty \"ranks\"");
  plan.microbatches = static_cast<int>(*mbs);
  reader.microbatches = plan.microbatches;
  reader.stages = static_cast<int>(stages->size());
  for (const json::Value &s : *stages)
    plan.stageNames.push_back(s.getAsString().value_or("?").str());
  if (const json::Value *inputs = root->get("inputs")) {
    const json::Array *all = inputs->getAsArray();
    if (!all || all->size() != stages->size())
      return reader.fail("inputs", "needs one array of stage indices per "
                                   "stage");
    for (size_t s = 0; s < all->size(); ++s) {
      const json::Array *in = (*all)[s].getAsArray();
      if (!in)
        return reader.fail("inputs", "needs one array of stage indices per "
                                     "stage");
      std::vector<int> ids;
      for (const json::Value &v : *in) {
        std::optional<int64_t> i = v.getAsInteger();
        if (!i || *i < 0 || *i >= static_cast<int64_t>(s))
          return reader.fail("inputs",
                             fmt::format("stage {} names input {}; inputs "
                                         "are earlier stages' indices",
                                         s, v.getAsInteger().value_or(-1)));
        ids.push_back(static_cast<int>(*i));
      }
      plan.stageInputs.push_back(std::move(ids));
    }
  }
  plan.stageLayers.assign(stages->size(), 0);
  if (const json::Array *layers = root->getArray("layers")) {
    if (layers->size() != stages->size())
      return reader.fail("layers", "needs one entry per stage");
    for (size_t s = 0; s < layers->size(); ++s) {
      std::optional<int64_t> l = (*layers)[s].getAsInteger();
      if (!l || *l < 0)
        return reader.fail("layers", "entries must be non-negative integers");
      plan.stageLayers[s] = static_cast<int>(*l);
    }
  }
  if (const json::Array *recompute = root->getArray("recompute")) {
    if (!recompute->empty() && recompute->size() != stages->size())
      return reader.fail("recompute", "needs one entry per stage, or none");
    for (size_t s = 0; s < recompute->size(); ++s) {
      std::optional<llvm::StringRef> row = (*recompute)[s].getAsString();
      if (!row || row->size() != static_cast<size_t>(plan.microbatches))
        return reader.fail("recompute",
                           "entries must be strings of one letter per "
                           "microbatch");
      for (int m = 0; m < plan.microbatches; ++m) {
        size_t mode = llvm::StringRef("nfs").find((*row)[m]);
        if (mode == llvm::StringRef::npos)
          return reader.fail("recompute",
                             "letters must be n (none), f (full) or s "
                             "(selective)");
        plan.recompute.set(s, m, static_cast<Recompute>(mode), stages->size(),
                           plan.microbatches);
      }
    }
  } else if (root->get("recompute")) {
    return reader.fail("recompute", "must be an array of strings");
  }
  plan.stageAttention.assign(stages->size(), false);
  if (const json::Array *attention = root->getArray("attention")) {
    if (attention->size() != stages->size())
      return reader.fail("attention", "needs one entry per stage");
    for (size_t s = 0; s < attention->size(); ++s)
      plan.stageAttention[s] = (*attention)[s].getAsBoolean().value_or(false);
  }
  const int numRanks = static_cast<int>(ranks->size());
  for (const json::Value &r : *placement) {
    std::optional<int64_t> x = r.getAsInteger();
    if (!x || *x < 0 || *x >= numRanks)
      return reader.fail("placement", "every entry must be a rank index");
    plan.placement.push_back(static_cast<int>(*x));
  }
  if (const json::Value *links = root->get("links")) {
    const json::Object *o = links->getAsObject();
    int64_t node = 0;
    if (o)
      node = o->getInteger("node").value_or(0);
    auto link = [&](llvm::StringRef name) -> std::optional<Problem::Link> {
      const json::Object *l = o ? o->getObject(name) : nullptr;
      std::optional<double> latency =
          l ? l->getNumber("latency") : std::nullopt;
      std::optional<double> bandwidth =
          l ? l->getNumber("bandwidth") : std::nullopt;
      if (!latency || !bandwidth || !std::isfinite(*latency) ||
          *latency < 0.0 || !std::isfinite(*bandwidth) || *bandwidth <= 0.0)
        return std::nullopt;
      return Problem::Link{*latency, *bandwidth};
    };
    std::optional<Problem::Link> intra = link("intra"), inter = link("inter");
    if (node < 1 || !intra || !inter)
      return reader.fail("links",
                         "needs \"node\" >= 1 and \"intra\" and \"inter\" "
                         "objects with a finite \"latency\" >= 0 and "
                         "\"bandwidth\" > 0");
    plan.links = Problem::Links{static_cast<int>(node), *intra, *inter};
  }
  if (const json::Value *lengths = root->get("lengths")) {
    const json::Array *a = lengths->getAsArray();
    std::optional<double> reference = root->getNumber("reference_length");
    if (!a || a->size() != static_cast<size_t>(plan.microbatches) ||
        !reference || !std::isfinite(*reference) || *reference <= 0.0)
      return reader.fail("lengths",
                         "needs one length per microbatch and a finite "
                         "\"reference_length\" > 0");
    for (const json::Value &v : *a) {
      std::optional<double> l = v.getAsNumber();
      if (!l || !std::isfinite(*l) || *l <= 0.0)
        return reader.fail("lengths", "every length must be finite and > 0");
      plan.lengths.push_back(*l);
    }
    plan.referenceLength = *reference;
  }
  if (const json::Value *dp = root->get("data_parallel")) {
    const json::Object *o = dp->getAsObject();
    std::optional<int64_t> degree = o ? o->getInteger("degree") : std::nullopt;
    std::optional<llvm::StringRef> sharding =
        o ? o->getString("sharding") : std::nullopt;
    if (!degree || *degree < 1 || !sharding ||
        (*sharding != "none" && *sharding != "full" && *sharding != "hybrid"))
      return reader.fail("data_parallel",
                         "needs an integer \"degree\" >= 1 and a "
                         "\"sharding\" of none, full or hybrid");
    plan.dataParallel = static_cast<int>(*degree);
    plan.sharding = sharding->str();
  }
  if (const json::Value *order = root->get("microbatch_order")) {
    const json::Array *a = order->getAsArray();
    std::vector<bool> seen(plan.microbatches, false);
    bool ok = a && a->size() == static_cast<size_t>(plan.microbatches);
    for (size_t k = 0; ok && k < a->size(); ++k) {
      std::optional<int64_t> v = (*a)[k].getAsInteger();
      ok = v && *v >= 0 && *v < plan.microbatches && !seen[*v];
      if (ok) {
        seen[*v] = true;
        plan.microbatchOrder.push_back(static_cast<int>(*v));
      }
    }
    if (!ok)
      return reader.fail("microbatch_order",
                         "must be a permutation of the microbatches 0.." +
                             std::to_string(plan.microbatches - 1));
  }
  plan.simulatedMakespan = root->getNumber("simulated_makespan").value_or(0.0);
  plan.simulatedSpan = root->getNumber("simulated_span").value_or(0.0);
  if (!std::isfinite(plan.simulatedSpan) || plan.simulatedSpan < 0.0)
    return reader.fail("simulated_span", "must be a finite number >= 0");
  if (const json::Array *busy = root->getArray("simulated_busy"))
    for (const json::Value &b : *busy)
      plan.simulatedBusy.push_back(b.getAsNumber().value_or(0.0));
  if (const json::Array *starts = root->getArray("simulated_start"))
    for (const json::Value &rank : *starts) {
      plan.simulatedStart.emplace_back();
      if (const json::Array *a = rank.getAsArray())
        for (const json::Value &t : *a)
          plan.simulatedStart.back().push_back(t.getAsNumber().value_or(0.0));
    }
  for (int r = 0; r < numRanks; ++r) {
    const json::Object *rank = (*ranks)[r].getAsObject();
    const json::Array *slots = rank ? rank->getArray("slots") : nullptr;
    const json::Array *ops = rank ? rank->getArray("ops") : nullptr;
    if (!slots || !ops)
      return reader.fail(fmt::format("rank {}", r),
                         "needs \"slots\" and \"ops\" arrays");
    PlanRank pr;
    if (const json::Value *device = rank->get("device")) {
      const json::Object *d = device->getAsObject();
      std::optional<llvm::StringRef> name =
          d ? d->getString("name") : std::nullopt;
      std::optional<double> speed = d ? d->getNumber("speed") : std::nullopt;
      const json::Value *memory = d ? d->get("memory") : nullptr;
      std::optional<double> bytes =
          memory ? memory->getAsNumber() : std::nullopt;
      if (!name || name->empty() || !speed || !std::isfinite(*speed) ||
          *speed <= 0.0 ||
          (memory && (!bytes || !std::isfinite(*bytes) || *bytes <= 0.0)))
        return reader.fail(fmt::format("rank {} device", r),
                           "needs a non-empty \"name\", a finite \"speed\" "
                           "> 0 and, if given, a finite \"memory\" > 0");
      pr.device = name->str();
      pr.speed = *speed;
      if (memory)
        pr.memory = *bytes;
    }
    for (const json::Value &b : *slots) {
      std::optional<int64_t> bytes = b.getAsInteger();
      if (!bytes || *bytes < 1)
        return reader.fail(fmt::format("rank {} slots", r),
                           "sizes must be positive integers");
      pr.slotBytes.push_back(*bytes);
    }
    for (size_t i = 0; i < ops->size(); ++i) {
      llvm::Expected<PlanOp> op =
          reader.op((*ops)[i], fmt::format("rank {} op {}", r, i), numRanks, r,
                    pr.slotBytes, false);
      if (!op)
        return op.takeError();
      pr.ops.push_back(std::move(*op));
    }
    plan.ranks.push_back(std::move(pr));
  }
  if (llvm::Error err = checkComputes(plan))
    return reader.fail("schedule", llvm::toString(std::move(err)));
  if (llvm::Error err = checkReductions(plan))
    return reader.fail("reductions", llvm::toString(std::move(err)));
  return plan;
}

Schedule Plan::computeSchedule() const {
  Schedule schedule;
  schedule.placement = placement;
  schedule.recompute = recompute;
  for (const PlanRank &rank : ranks) {
    schedule.ranks.emplace_back();
    for (const PlanOp &op : rank.ops)
      if (op.kind == PlanOp::Kind::Compute)
        schedule.ranks.back().push_back(op.action);
  }
  return schedule;
}
