//===- Elastic.cpp - The --elastic supervisor ----------------------------===//
//
// Runs a training job as attempts (child processes, or mpirun jobs under a
// launcher). After a lost rank it re-plans for the survivors (compiling the
// spec, or taking a plan file's precomputed fallback) and resumes from the
// last checkpoint; after a straggler it re-plans with the measured speeds.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Driver.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <optional>

using namespace llvm;
using namespace stagecraft::runtime;
namespace sched = stagecraft::pipe::sched;

/// Seconds since the epoch (a failure stamp's clock).
static double epochSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The rank an attempt's error output names as lost: our own `rank lost:
/// rank R` line, or Open MPI's report of a process that died.
static std::optional<int> lostRankIn(StringRef text) {
  for (StringRef marker :
       {StringRef("rank lost: rank "), StringRef("process rank ")}) {
    size_t at = text.find(marker);
    if (at == StringRef::npos)
      continue;
    StringRef digits = text.drop_front(at + marker.size());
    digits = digits.take_while([](char c) { return c >= '0' && c <= '9'; });
    int r = -1;
    if (!digits.getAsInteger(10, r))
      return r;
  }
  return std::nullopt;
}

int stagecraft::runtime::superviseElastic(
    const DriverOptions &o, const PlanSource &source, const std::string &self,
    const std::vector<std::string> &argv) {
  // Compiles the spec for \p ranks ranks as \p kind, timing it.
  auto planFor =
      [&](int ranks, const std::string &kind, llvm::ArrayRef<int> survivors,
          llvm::ArrayRef<double> factors, double &ms) -> Expected<sched::Plan> {
    PlanRequest request;
    request.kind = kind;
    request.chunks = kind == "interleaved-1f1b" ? o.chunks : 0;
    request.ranks = ranks;
    request.survivors.assign(survivors.begin(), survivors.end());
    request.speedFactors.assign(factors.begin(), factors.end());
    request.quiet = true;
    auto t0 = std::chrono::steady_clock::now();
    Expected<sched::Plan> plan = source.compile(request);
    ms = std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
             .count();
    return plan;
  };
  auto stop = [](const std::string &message, int rc) {
    errs() << "stagecraft-run: elastic: " << message << "\n";
    return rc;
  };
  const bool fromSpec = StringRef(o.input).ends_with(".mlir");
  if (!o.train || o.checkpointDir.empty() ||
      (fromSpec && o.scheduleKind.empty()) ||
      (!fromSpec && !o.scheduleKind.empty()))
    return stop("--elastic needs --train, --checkpoint-dir and either a spec "
                "(.mlir) with --schedule or a plan file (from "
                "stagecraft-translate --pipe-to-plan, its fallbacks for fewer "
                "ranks with --fallbacks=K)",
                1);
  // One injected failure per attempt, checked before anything runs.
  std::vector<std::string> injections;
  if (!o.injectFailure.empty()) {
    SmallVector<StringRef, 4> parts;
    StringRef(o.injectFailure).split(parts, ',');
    for (StringRef part : parts) {
      // "none": this attempt runs without one.
      if (part == "none") {
        injections.push_back("");
        continue;
      }
      TrainOptions probe;
      if (Error err = parseInjectedFailure(part, probe))
        return stop(toString(std::move(err)), 1);
      injections.push_back(part.str());
    }
  }
  if (!fromSpec && o.stragglerThreshold && *o.stragglerThreshold != 0.0)
    return stop("--straggler-threshold re-plans with the measured speeds, "
                "which compiles the spec: run --elastic on the spec, not on "
                "a plan file",
                1);
  double ms = 0.0;
  std::string kind = o.scheduleKind;
  std::optional<sched::Plan> planFile;
  int ranks = 0;
  if (fromSpec) {
    Expected<sched::Plan> first = planFor(
        o.ranks, kind, std::vector<int>(o.survivors.begin(), o.survivors.end()),
        std::vector<double>(o.speedFactors.begin(), o.speedFactors.end()), ms);
    if (!first)
      return stop(toString(first.takeError()), 1);
    ranks = first->numRanks();
  } else {
    Expected<sched::Plan> plan = loadPlan(o, source, 0);
    if (!plan)
      return stop(toString(plan.takeError()), 1);
    ranks = plan->numRanks();
    kind = plan->schedule;
    planFile = std::move(*plan);
  }
  // The attempt's own options: everything but the supervisor's, and those
  // set per attempt.
  std::vector<std::string> kept;
  for (const std::string &arg : argv) {
    StringRef a(arg);
    bool drop = a == o.input;
    for (StringRef flag :
         {"elastic", "max-failures", "launcher", "ranks", "resume", "schedule",
          "inject-failure", "failure-stamp", "survivors", "speed-factors",
          "max-replans"})
      for (StringRef dashes : {"-", "--"}) {
        std::string f = (dashes + flag).str();
        drop |= a == f || a.starts_with(f + "=");
      }
    if (!o.launcher.empty())
      drop |= a.starts_with("--backend") || a.starts_with("-backend");
    if (!drop)
      kept.push_back(a.str());
  }
  // Files of this supervisor: each attempt's error output and failure
  // stamp, and the fallback plans it runs; removed at the end.
  std::vector<std::string> scratch;
  auto scratchFile = [&](StringRef prefix, StringRef suffix) {
    SmallString<128> path;
    if (sys::fs::createTemporaryFile(prefix, suffix, path))
      return std::string();
    scratch.push_back(path.str().str());
    return path.str().str();
  };
  auto cleanUp = [&](int rc) {
    for (const std::string &f : scratch)
      (void)sys::fs::remove(f);
    return rc;
  };
  std::string attemptInput = o.input;
  // Ranks of the first attempt still running (its numbering), to say which
  // remain.
  std::vector<int> survivors(ranks);
  for (int r = 0; r < ranks; ++r)
    survivors[r] = r;
  if (!o.survivors.empty() && int(o.survivors.size()) == ranks)
    survivors.assign(o.survivors.begin(), o.survivors.end());
  // Each rank's speed factor (a straggler's measured speed over its
  // device's), by its number in the first attempt.
  std::map<int, double> factorOf;
  for (size_t k = 0; k < o.speedFactors.size() && k < survivors.size(); ++k)
    factorOf[survivors[k]] = o.speedFactors[k];
  auto factors = [&] {
    std::vector<double> list;
    for (int r : survivors)
      list.push_back(factorOf.count(r) ? factorOf[r] : 1.0);
    if (llvm::all_of(list, [](double f) { return f == 1.0; }))
      list.clear();
    return list;
  };
  // Stragglers are watched (the attempts get --straggler-threshold) until
  // --max-replans re-plans were made for them.
  bool watch = true;
  int replans = 0;
  auto describeSurvivors = [&] {
    std::string list;
    for (int r : survivors)
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    return fmt::format("{} of the first attempt", list);
  };
  bool resumeNext = o.resume;
  int failures = 0;
  for (int attempt = 1;; ++attempt) {
    std::vector<std::string> args;
    if (!o.launcher.empty()) {
      SmallVector<StringRef, 8> words;
      StringRef(o.launcher).split(words, ' ', -1, /*KeepEmpty=*/false);
      for (StringRef w : words) {
        std::string word = w.str();
        size_t at = word.find("{ranks}");
        if (at != std::string::npos)
          word.replace(at, 7, std::to_string(ranks));
        args.push_back(word);
      }
    }
    args.push_back(self);
    args.push_back(attemptInput);
    for (const std::string &a : kept)
      if (watch || !StringRef(a).contains("-straggler-threshold"))
        args.push_back(a);
    if (!o.launcher.empty())
      args.push_back("--backend=mpi");
    if (fromSpec) {
      args.push_back("--ranks=" + std::to_string(ranks));
      args.push_back("--schedule=" + kind);
      std::string list;
      for (int r : survivors)
        list += (list.empty() ? "" : ",") + std::to_string(r);
      args.push_back("--survivors=" + list);
      std::string speeds;
      for (double f : factors())
        speeds += fmt::format("{}{:.6g}", speeds.empty() ? "" : ",", f);
      if (!speeds.empty())
        args.push_back("--speed-factors=" + speeds);
    }
    if (resumeNext)
      args.push_back("--resume");
    std::string stamp;
    if (size_t(attempt) <= injections.size() &&
        !injections[attempt - 1].empty()) {
      args.push_back("--inject-failure=" + injections[attempt - 1]);
      stamp = scratchFile("stagecraft-failure", "txt");
      (void)sys::fs::remove(stamp);
      args.push_back("--failure-stamp=" + stamp);
    }
    std::string shown;
    for (const std::string &a : args)
      shown += (shown.empty() ? "" : " ") + a;
    outs() << "elastic: attempt " << attempt << " on " << ranks << " ranks ("
           << kind << "): " << shown << "\n";
    outs().flush();
    std::vector<StringRef> refs(args.begin(), args.end());
    ErrorOr<std::string> program = sys::findProgramByName(args.front());
    if (!program)
      return cleanUp(stop("cannot find " + args.front(), 1));
    std::string errFile = scratchFile("stagecraft-attempt", "err");
    std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt,
                                            StringRef(errFile)};
    std::string error;
    int rc = sys::ExecuteAndWait(*program, refs, std::nullopt, redirects, 0, 0,
                                 &error);
    double ended = epochSeconds();
    // The attempt's error output, as it would have been shown.
    std::string errText;
    if (ErrorOr<std::unique_ptr<MemoryBuffer>> text =
            MemoryBuffer::getFile(errFile))
      errText = (*text)->getBuffer().str();
    errs() << errText;
    errs().flush();
    if (rc == 0) {
      outs() << "elastic: finished after " << failures << " lost rank"
             << (failures == 1 ? "" : "s")
             << (replans ? fmt::format(" and {} re-plan{} for stragglers",
                                       replans, replans == 1 ? "" : "s")
                         : std::string())
             << "\n";
      return cleanUp(0);
    }
    if (rc == kExitStraggler && fromSpec) {
      // Stopped at a checkpoint for stragglers: re-plan on the same ranks
      // with the speeds they showed.
      std::string who;
      SmallVector<StringRef, 16> lines;
      StringRef(errText).split(lines, '\n');
      for (StringRef line : lines) {
        if (!line.consume_front(kStragglerPrefix) ||
            !line.consume_front("rank "))
          continue;
        int r = -1;
        if (line.consumeInteger(10, r) || r < 0 || r >= int(survivors.size()))
          continue;
        StringRef marker = "its measured speed is ";
        size_t at = line.find(marker);
        double f = 0.0;
        if (at == StringRef::npos ||
            line.drop_front(at + marker.size())
                .take_while([](char c) { return c != ' '; })
                .getAsDouble(f) ||
            !(f > 0.0))
          continue;
        double &factor = factorOf.try_emplace(survivors[r], 1.0).first->second;
        factor *= f;
        who += fmt::format(
            "{}rank {}{} at {:.4g} of its device's speed",
            who.empty() ? "" : ", ", r,
            survivors[r] != r
                ? fmt::format(" (rank {} of the first attempt)", survivors[r])
                : std::string(),
            factor);
      }
      if (who.empty())
        return cleanUp(stop(fmt::format("attempt {} stopped for a straggler "
                                        "but named none",
                                        attempt),
                            1));
      std::string why;
      Expected<sched::Plan> plan =
          planFor(ranks, kind, survivors, factors(), ms);
      if (!plan) {
        why = toString(plan.takeError());
        double autoMs = 0.0;
        plan = planFor(ranks, "auto", survivors, factors(), autoMs);
        if (!plan)
          return cleanUp(
              stop(fmt::format("no plan fits the measured speeds "
                               "({}): as {}: {}; as auto: {}",
                               who, kind, why, toString(plan.takeError())),
                   kExitStraggler));
        ms += autoMs;
        kind = "auto";
      }
      if (++replans >= o.maxReplans)
        watch = false;
      resumeNext = true;
      outs() << fmt::format(
          "elastic: straggler {}; re-planned for {} ranks as {} with the "
          "measured speeds and verified in {:.1f} ms{}; resuming from the "
          "checkpoint{}\n",
          who, ranks, kind, ms,
          why.empty() ? "" : " (the old kind does not apply: " + why + ")",
          watch ? ""
                : fmt::format(" (--max-replans={} reached: stragglers "
                              "are no longer watched)",
                              int(o.maxReplans)));
      outs().flush();
      continue;
    }
    // Under a launcher, a killed process ends the job with a signal status.
    bool lost = rc == kExitRankLost || (!o.launcher.empty() && rc > 128);
    if (!lost)
      return cleanUp(
          stop(fmt::format("attempt {} failed with status {} (not "
                           "a lost rank){}",
                           attempt, rc, error.empty() ? "" : ": " + error),
               rc < 0 ? 1 : rc));
    std::optional<int> lostRank = lostRankIn(errText);
    std::string which = "a rank";
    if (lostRank && *lostRank < int(survivors.size())) {
      which = fmt::format("rank {}", *lostRank);
      if (survivors[*lostRank] != *lostRank)
        which += fmt::format(" (rank {} of the first attempt)",
                             survivors[*lostRank]);
      survivors.erase(survivors.begin() + *lostRank);
    } else {
      // Not named (a launcher that says nothing): re-planned as if the last
      // rank were lost; the count is what matters without devices.
      which = "a rank (not named; taken as the last)";
      survivors.pop_back();
    }
    std::string detected;
    if (!stamp.empty())
      if (ErrorOr<std::unique_ptr<MemoryBuffer>> text =
              MemoryBuffer::getFile(stamp)) {
        double fired = 0.0;
        if (!(*text)->getBuffer().trim().getAsDouble(fired))
          detected = fmt::format("; every rank stopped {:.2f} s after the "
                                 "injected failure",
                                 ended - fired);
      }
    if (++failures > o.maxFailures)
      return cleanUp(
          stop(fmt::format("stopping after {} lost rank{} (--max-failures={}); "
                           "surviving ranks: {}",
                           failures, failures == 1 ? "" : "s",
                           int(o.maxFailures), describeSurvivors()),
               kExitRankLost));
    if (ranks - 1 < 1)
      return cleanUp(stop("no rank is left to re-plan on", kExitRankLost));
    std::string why, how;
    if (fromSpec) {
      // Re-plan for the survivors: the same kind where it still applies.
      Expected<sched::Plan> plan =
          planFor(ranks - 1, kind, survivors, factors(), ms);
      if (!plan) {
        why = toString(plan.takeError());
        double autoMs = 0.0;
        plan = planFor(ranks - 1, "auto", survivors, factors(), autoMs);
        if (!plan)
          return cleanUp(
              stop(fmt::format("no plan fits the {} surviving ranks ({}): as "
                               "{}: {}; as auto: {}",
                               ranks - 1, describeSurvivors(), kind, why,
                               toString(plan.takeError())),
                   kExitRankLost));
        ms += autoMs;
        kind = "auto";
      }
      how = fmt::format("re-planned for {} ranks as {} and verified in {:.1f} "
                        "ms",
                        ranks - 1, kind, ms);
    } else {
      // The plan file's precomputed fallback: no compiler at run time.
      auto t0 = std::chrono::steady_clock::now();
      const sched::Plan *fallback = nullptr;
      std::string held;
      for (const sched::Plan &f : planFile->fallbacks) {
        held += (held.empty() ? "" : ", ") + std::to_string(f.numRanks());
        if (f.numRanks() == ranks - 1)
          fallback = &f;
      }
      bool onDevices =
          !planFile->ranks.empty() && !planFile->ranks[0].device.empty();
      if (!fallback)
        return cleanUp(stop(
            onDevices
                ? fmt::format("no precomputed plan for the {} surviving "
                              "ranks ({}) in {}: a plan on devices(...) "
                              "holds none (the lost rank decides the "
                              "survivors' devices); run --elastic on the "
                              "spec",
                              ranks - 1, describeSurvivors(), o.input)
                : fmt::format("no precomputed plan for the {} surviving ranks "
                              "({}) in {} "
                              "(it holds fallbacks for {} ranks); write more "
                              "with stagecraft-translate --pipe-to-plan "
                              "--fallbacks=K, or run --elastic on the spec",
                              ranks - 1, describeSurvivors(), o.input,
                              held.empty() ? "no" : held),
            kExitRankLost));
      attemptInput = scratchFile("stagecraft-fallback", "json");
      std::error_code ec;
      raw_fd_ostream os(attemptInput, ec);
      if (ec)
        return cleanUp(
            stop("cannot write " + attemptInput + ": " + ec.message(), 1));
      os << sched::writePlan(*fallback);
      os.close();
      ms = std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - t0)
               .count();
      kind = fallback->schedule;
      how = fmt::format("took the precomputed plan for {} ranks ({}, "
                        "verified when it was written) in {:.1f} ms",
                        ranks - 1, kind, ms);
    }
    ranks -= 1;
    resumeNext = hasCheckpoint(o.checkpointDir);
    outs() << fmt::format(
        "elastic: lost {} (status {}){}; {}{}; {}\n", which, rc, detected, how,
        why.empty() ? "" : " (the old kind does not apply: " + why + ")",
        resumeNext ? "resuming from the last checkpoint"
                   : "no checkpoint yet: starting over");
    outs().flush();
  }
}
