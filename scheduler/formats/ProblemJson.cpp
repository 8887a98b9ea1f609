//===- ProblemJson.cpp - A problem as JSON, without MLIR ------------------===//
//
// See ProblemJson.h. Optional fields are written only when set; the reader
// refuses keys it does not know, so a field added to Problem without a line
// here is refused by name instead of being dropped.
//
//===----------------------------------------------------------------------===//

#include "scheduler/formats/ProblemJson.h"

#include "llvm/Support/JSON.h"

#include <fmt/format.h>

#include <set>

using namespace stagecraft::pipe::sched;
namespace json = llvm::json;

static constexpr int kVersion = 1;

void stagecraft::pipe::sched::writeProblemJson(llvm::raw_ostream &os,
                                               const Problem &p,
                                               const DataParallel *dp) {
  json::OStream j(os, 1);
  auto optional = [&](const char *key, const std::optional<double> &v) {
    if (v)
      j.attribute(key, *v);
  };
  auto ints = [&](const char *key, const std::vector<int> &v) {
    j.attributeArray(key, [&] {
      for (int x : v)
        j.value(x);
    });
  };
  j.object([&] {
    j.attribute("format", "stagecraft-problem");
    j.attribute("version", kVersion);
    j.attribute("name", p.name);
    j.attribute("ranks", p.ranks);
    j.attribute("microbatches", p.microbatches);
    j.attribute("latency", p.latency);
    j.attribute("message_overhead", p.messageOverhead);
    j.attribute("receive_overhead", p.receiveOverhead);
    optional("capacity", p.capacity);
    j.attributeArray("stages", [&] {
      for (const Stage &s : p.stages)
        j.object([&] {
          j.attribute("name", s.name);
          j.attribute("forward", s.forward);
          j.attribute("backward_input", s.backwardInput);
          j.attribute("backward_weight", s.backwardWeight);
          j.attribute("activation", s.activation);
          j.attribute("weight_grad", s.weightGrad);
          optional("recomputed", s.recomputed);
          optional("selective", s.selective);
          optional("selective_cost", s.selectiveCost);
          j.attribute("params", s.params);
          optional("forward_backward", s.forwardBackward);
          optional("fused_backward", s.fusedBackward);
          j.attribute("output", s.output);
          j.attribute("scaling_linear", s.scalingLinear);
          j.attribute("scaling_quadratic", s.scalingQuadratic);
          if (s.inputs)
            ints("inputs", *s.inputs);
          if (s.rank)
            j.attribute("rank", *s.rank);
          j.attribute("layers", s.layers);
          if (s.attention)
            j.attributeObject("attention", [&] {
              j.attribute("forward", s.attention->forward);
              j.attribute("backward", s.attention->backward);
              j.attribute("memory", s.attention->memory);
            });
        });
    });
    j.attributeArray("devices", [&] {
      for (const Problem::Device &d : p.devices)
        j.object([&] {
          j.attribute("name", d.name);
          j.attribute("speed", d.speed);
          optional("memory", d.memory);
        });
    });
    if (p.links) {
      auto link = [&](const char *key, const Problem::Link &l) {
        j.attributeObject(key, [&] {
          j.attribute("latency", l.latency);
          j.attribute("bandwidth", l.bandwidth);
        });
      };
      j.attributeObject("links", [&] {
        j.attribute("node", p.links->node);
        link("intra", p.links->intra);
        link("inter", p.links->inter);
      });
    }
    j.attributeArray("lengths", [&] {
      for (double l : p.lengths)
        j.value(l);
    });
    j.attribute("reference_length", p.referenceLength);
    ints("microbatch_order", p.microbatchOrder);
    if (dp)
      j.attributeObject("data_parallel", [&] {
        j.attribute("degree", dp->degree);
        j.attribute("sharding", shardingName(dp->sharding));
        j.attribute("shard_group", dp->shardGroup);
        j.attribute("latency", dp->latency);
        j.attribute("bandwidth", dp->bandwidth);
        j.attribute("inter_latency", dp->interLatency);
        j.attribute("inter_bandwidth", dp->interBandwidth);
        j.attribute("optimizer", dp->optimizerPerByte);
        j.attributeArray("gradient", [&] {
          for (double b : dp->gradBytes)
            j.value(b);
        });
      });
  });
}

namespace {

/// Reads one JSON object's fields, each once, and names what is wrong.
class Fields {
public:
  Fields(const json::Object &object, std::string where)
      : object(object), where(std::move(where)) {}

  llvm::Error error(llvm::StringRef key, llvm::StringRef what) const {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("problem JSON: {}{}: {}", where,
                    key.empty() ? "" : fmt::format(" key \"{}\"", key.str()),
                    what.str()));
  }

  const json::Value *find(llvm::StringRef key, bool required,
                          llvm::Error &err) {
    seen.insert(key.str());
    const json::Value *v = object.get(key);
    if (!v && required && !err)
      err = error(key, "missing");
    return v;
  }

  void number(llvm::StringRef key, double &out, llvm::Error &err,
              bool required = true) {
    if (const json::Value *v = find(key, required, err)) {
      if (std::optional<double> d = v->getAsNumber())
        out = *d;
      else if (!err)
        err = error(key, "not a number");
    }
  }
  void optionalNumber(llvm::StringRef key, std::optional<double> &out,
                      llvm::Error &err) {
    if (object.get(key)) {
      double d = 0.0;
      number(key, d, err);
      out = d;
    } else {
      seen.insert(key.str());
    }
  }
  void integer(llvm::StringRef key, int &out, llvm::Error &err,
               bool required = true) {
    if (const json::Value *v = find(key, required, err)) {
      std::optional<int64_t> i = v->getAsInteger();
      if (i && *i >= INT32_MIN && *i <= INT32_MAX)
        out = static_cast<int>(*i);
      else if (!err)
        err = error(key, "not an integer");
    }
  }
  void string(llvm::StringRef key, std::string &out, llvm::Error &err) {
    if (const json::Value *v = find(key, true, err)) {
      if (std::optional<llvm::StringRef> s = v->getAsString())
        out = s->str();
      else if (!err)
        err = error(key, "not a string");
    }
  }
  const json::Array *array(llvm::StringRef key, llvm::Error &err,
                           bool required = true) {
    const json::Value *v = find(key, required, err);
    if (!v)
      return nullptr;
    if (const json::Array *a = v->getAsArray())
      return a;
    if (!err)
      err = error(key, "not an array");
    return nullptr;
  }
  const json::Object *child(llvm::StringRef key, llvm::Error &err,
                            bool required = true) {
    const json::Value *v = find(key, required, err);
    if (!v)
      return nullptr;
    if (const json::Object *o = v->getAsObject())
      return o;
    if (!err)
      err = error(key, "not an object");
    return nullptr;
  }
  void numbers(llvm::StringRef key, std::vector<double> &out,
               llvm::Error &err) {
    if (const json::Array *a = array(key, err))
      for (const json::Value &v : *a) {
        std::optional<double> d = v.getAsNumber();
        if (!d) {
          if (!err)
            err = error(key, "holds a value that is not a number");
          return;
        }
        out.push_back(*d);
      }
  }
  void integers(llvm::StringRef key, std::vector<int> &out, llvm::Error &err) {
    if (const json::Array *a = array(key, err))
      for (const json::Value &v : *a) {
        std::optional<int64_t> i = v.getAsInteger();
        if (!i || *i < INT32_MIN || *i > INT32_MAX) {
          if (!err)
            err = error(key, "holds a value that is not an integer");
          return;
        }
        out.push_back(static_cast<int>(*i));
      }
  }
  /// Every key was read: an unknown one is an error.
  void finish(llvm::Error &err) const {
    for (const auto &kv : object)
      if (!seen.count(kv.first.str()) && !err)
        err = error(kv.first, "unknown");
  }

private:
  const json::Object &object;
  std::string where;
  std::set<std::string> seen;
};

} // namespace

llvm::Expected<Problem>
stagecraft::pipe::sched::readProblemJson(llvm::StringRef text,
                                         std::optional<DataParallel> *dpOut) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("problem JSON: {}", llvm::toString(parsed.takeError())));
  const json::Object *top = parsed->getAsObject();
  if (!top)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "problem JSON: not an object");
  llvm::Error err = llvm::Error::success();
  Problem p;
  Fields f(*top, "top level");
  std::string format;
  int version = 0;
  f.string("format", format, err);
  f.integer("version", version, err);
  if (!err && format != "stagecraft-problem")
    err = f.error("format", "is not \"stagecraft-problem\"");
  if (!err && version != kVersion)
    err = f.error("version", fmt::format("{} is not {}", version, kVersion));
  f.string("name", p.name, err);
  f.integer("ranks", p.ranks, err);
  f.integer("microbatches", p.microbatches, err);
  f.number("latency", p.latency, err);
  // Written since the plan file carries profiled problems; absent in older
  // files, where they were zero.
  f.number("message_overhead", p.messageOverhead, err, /*required=*/false);
  f.number("receive_overhead", p.receiveOverhead, err, /*required=*/false);
  f.optionalNumber("capacity", p.capacity, err);
  if (const json::Array *stages = f.array("stages", err))
    for (size_t k = 0; k < stages->size() && !err; ++k) {
      const json::Object *o = (*stages)[k].getAsObject();
      if (!o) {
        err = f.error("stages", fmt::format("entry {} is not an object", k));
        break;
      }
      Stage s;
      Fields g(*o, fmt::format("stage {}", k));
      g.string("name", s.name, err);
      g.number("forward", s.forward, err);
      g.number("backward_input", s.backwardInput, err);
      g.number("backward_weight", s.backwardWeight, err);
      g.number("activation", s.activation, err);
      g.number("weight_grad", s.weightGrad, err);
      g.optionalNumber("recomputed", s.recomputed, err);
      g.optionalNumber("selective", s.selective, err);
      g.optionalNumber("selective_cost", s.selectiveCost, err);
      g.number("params", s.params, err);
      g.optionalNumber("forward_backward", s.forwardBackward, err);
      g.optionalNumber("fused_backward", s.fusedBackward, err);
      g.number("output", s.output, err);
      g.number("scaling_linear", s.scalingLinear, err);
      g.number("scaling_quadratic", s.scalingQuadratic, err);
      if (o->get("inputs")) {
        s.inputs.emplace();
        g.integers("inputs", *s.inputs, err);
      }
      if (o->get("rank")) {
        int r = 0;
        g.integer("rank", r, err);
        s.rank = r;
      }
      g.integer("layers", s.layers, err);
      if (const json::Object *a = g.child("attention", err, false)) {
        Stage::Attention at;
        Fields h(*a, fmt::format("stage {} attention", k));
        h.number("forward", at.forward, err);
        h.number("backward", at.backward, err);
        h.number("memory", at.memory, err);
        h.finish(err);
        s.attention = at;
      }
      g.finish(err);
      p.stages.push_back(std::move(s));
    }
  if (const json::Array *devices = f.array("devices", err))
    for (size_t k = 0; k < devices->size() && !err; ++k) {
      const json::Object *o = (*devices)[k].getAsObject();
      if (!o) {
        err = f.error("devices", fmt::format("entry {} is not an object", k));
        break;
      }
      Problem::Device d;
      Fields g(*o, fmt::format("device {}", k));
      g.string("name", d.name, err);
      g.number("speed", d.speed, err);
      g.optionalNumber("memory", d.memory, err);
      g.finish(err);
      p.devices.push_back(std::move(d));
    }
  if (const json::Object *l = f.child("links", err, false)) {
    Problem::Links links;
    Fields g(*l, "links");
    g.integer("node", links.node, err);
    auto link = [&](const char *key, Problem::Link &out) {
      if (const json::Object *o = g.child(key, err)) {
        Fields h(*o, fmt::format("links {}", key));
        h.number("latency", out.latency, err);
        h.number("bandwidth", out.bandwidth, err);
        h.finish(err);
      }
    };
    link("intra", links.intra);
    link("inter", links.inter);
    g.finish(err);
    p.links = links;
  }
  f.numbers("lengths", p.lengths, err);
  f.number("reference_length", p.referenceLength, err);
  f.integers("microbatch_order", p.microbatchOrder, err);
  std::optional<DataParallel> dp;
  if (const json::Object *o = f.child("data_parallel", err, false)) {
    DataParallel d;
    Fields g(*o, "data_parallel");
    std::string sharding;
    g.integer("degree", d.degree, err);
    g.string("sharding", sharding, err);
    g.integer("shard_group", d.shardGroup, err);
    g.number("latency", d.latency, err);
    g.number("bandwidth", d.bandwidth, err);
    g.number("inter_latency", d.interLatency, err);
    g.number("inter_bandwidth", d.interBandwidth, err);
    g.number("optimizer", d.optimizerPerByte, err);
    g.numbers("gradient", d.gradBytes, err);
    g.finish(err);
    if (!err) {
      llvm::Expected<DataParallel::Sharding> mode = parseSharding(sharding);
      if (mode)
        d.sharding = *mode;
      else
        err = g.error("sharding", llvm::toString(mode.takeError()));
    }
    dp = std::move(d);
  }
  f.finish(err);
  if (err)
    return std::move(err);
  if (llvm::Error invalid = validateProblem(p))
    return std::move(invalid);
  if (dp)
    if (llvm::Error invalid = validateDataParallel(p, *dp))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "problem JSON: data_parallel: " +
                                         llvm::toString(std::move(invalid)));
  if (dpOut)
    *dpOut = std::move(dp);
  return p;
}
