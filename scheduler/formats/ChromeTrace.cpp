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
                                    const Timeline &timeline) {
  int pid = nextPid++;
  events.push_back(json::Object{{"name", "process_name"},
                                {"ph", "M"},
                                {"pid", pid},
                                {"args", json::Object{{"name", name.str()}}}});
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    int tid = static_cast<int>(r);
    events.push_back(json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", pid},
        {"tid", tid},
        {"args", json::Object{{"name", fmt::format("rank {}", r)}}}});
    events.push_back(json::Object{{"name", "thread_sort_index"},
                                  {"ph", "M"},
                                  {"pid", pid},
                                  {"tid", tid},
                                  {"args", json::Object{{"sort_index", tid}}}});
    for (const TimedAction &ta : timeline.ranks[r]) {
      const Action &a = ta.action;
      events.push_back(json::Object{
          {"name", shortName(a)},
          {"cat", actionOpName(a.kind).str()},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", ta.start * microsPerUnit},
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
    events.push_back(json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", pid},
        {"tid", track},
        {"args", json::Object{{"name", fmt::format("link {} -> {}", link.first,
                                                   link.second)}}}});
    events.push_back(
        json::Object{{"name", "thread_sort_index"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", track},
                     {"args", json::Object{{"sort_index", track}}}});
  }
  for (const TimedTransfer &t : timeline.transfers) {
    const Action &a = t.producer;
    events.push_back(json::Object{
        {"name", fmt::format("from {}", shortName(a))},
        {"cat", "transfer"},
        {"ph", "X"},
        {"pid", pid},
        {"tid", linkTrack[{t.from, t.to}]},
        {"ts", t.start * microsPerUnit},
        {"dur", (t.end - t.start) * microsPerUnit},
        {"args", json::Object{{"stage", problem.stages[a.stage].name},
                              {"microbatch", a.microbatch},
                              {"from", t.from},
                              {"to", t.to}}}});
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
