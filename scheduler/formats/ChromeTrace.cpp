//===- ChromeTrace.cpp - Chrome trace / Perfetto JSON ---------------------===//
//
// Complete ("X") events per action, metadata events naming processes and
// rank tracks; see ChromeTrace.h.
//
//===----------------------------------------------------------------------===//

#include "scheduler/formats/ChromeTrace.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <map>
#include <utility>

using namespace stagecraft::pipe::sched;
namespace json = llvm::json;

void ChromeTraceWriter::addTimeline(llvm::StringRef name,
                                    const Problem &problem,
                                    const Timeline &timeline,
                                    const DataParallelTimeline *dataParallel) {
  int pid = nextPid++;
  const double shift = dataParallel ? dataParallel->shift : 0.0;
  auto addTrack = [&](int tid, std::string name) {
    events.push_back(json::Object{{"name", "thread_name"},
                                  {"ph", "M"},
                                  {"pid", pid},
                                  {"tid", tid},
                                  {"args", json::Object{{"name", name}}}});
    events.push_back(json::Object{{"name", "thread_sort_index"},
                                  {"ph", "M"},
                                  {"pid", pid},
                                  {"tid", tid},
                                  {"args", json::Object{{"sort_index", tid}}}});
  };
  events.push_back(json::Object{{"name", "process_name"},
                                {"ph", "M"},
                                {"pid", pid},
                                {"args", json::Object{{"name", name.str()}}}});
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    int tid = static_cast<int>(r);
    addTrack(tid, fmt::format("rank {}", r));
    for (const TimedAction &ta : timeline.ranks[r]) {
      const Action &a = ta.action;
      events.push_back(json::Object{
          {"name", shortName(a)},
          {"cat", actionOpName(a.kind).str()},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", (ta.start + shift) * microsPerUnit},
          {"dur", (ta.end - ta.start) * microsPerUnit},
          {"args", json::Object{{"stage", problem.stages[a.stage].name},
                                {"microbatch", a.microbatch}}}});
    }
  }
  // Contended links: a track per directed link, after the ranks, with each
  // transfer over the time it held the link.
  std::map<std::pair<int, int>, int> linkTrack;
  for (const TimedTransfer &t : timeline.transfers)
    linkTrack.try_emplace({t.from, t.to}, 0);
  int tid = static_cast<int>(timeline.ranks.size());
  for (auto &[link, track] : linkTrack) {
    track = tid++;
    addTrack(track, fmt::format("link {} -> {}", link.first, link.second));
  }
  for (const TimedTransfer &t : timeline.transfers) {
    const Action &a = t.producer;
    events.push_back(json::Object{
        {"name", fmt::format("from {}", shortName(a))},
        {"cat", "transfer"},
        {"ph", "X"},
        {"pid", pid},
        {"tid", linkTrack[{t.from, t.to}]},
        {"ts", (t.start + shift) * microsPerUnit},
        {"dur", (t.end - t.start) * microsPerUnit},
        {"args", json::Object{{"stage", problem.stages[a.stage].name},
                              {"microbatch", a.microbatch},
                              {"from", t.from},
                              {"to", t.to}}}});
  }
  if (!dataParallel)
    return;
  // The optimizer step on the rank's own track; the collectives on a track
  // per rank (its data-parallel link), after the pipeline's links.
  for (size_t r = 0; r < dataParallel->ops.size(); ++r) {
    const int track = tid++;
    addTrack(track, fmt::format("rank {} data parallel", r));
    for (const DataParallelOp &op : dataParallel->ops[r]) {
      const bool optimizer = op.kind == DataParallelOp::Kind::Optimizer;
      std::string name =
          optimizer ? std::string("optimizer")
          : op.kind == DataParallelOp::Kind::Gather
              ? fmt::format("gather {}", problem.stages[op.stage].name)
              : fmt::format("reduce {} #{}", problem.stages[op.stage].name,
                            op.bucket);
      json::Object args{{"bytes", op.bytes},
                        {"released", op.release * microsPerUnit}};
      if (!optimizer)
        args["stage"] = problem.stages[op.stage].name;
      events.push_back(json::Object{
          {"name", std::move(name)},
          {"cat", optimizer                                 ? "optimizer"
                  : op.kind == DataParallelOp::Kind::Gather ? "gather"
                                                            : "reduce"},
          {"ph", "X"},
          {"pid", pid},
          {"tid", optimizer ? static_cast<int>(r) : track},
          {"ts", op.start * microsPerUnit},
          {"dur", (op.end - op.start) * microsPerUnit},
          {"args", std::move(args)}});
    }
  }
}

std::string ChromeTraceWriter::str() const {
  json::Object root{{"traceEvents", json::Array(events)},
                    {"displayTimeUnit", "ms"}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << json::Value(std::move(root)) << "\n";
  return os.str();
}
