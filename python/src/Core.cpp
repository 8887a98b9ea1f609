//===- Core.cpp - The stagecraft Python module (nanobind) -----------------===//
//
// `stagecraft._core`: the MLIR-free scheduler library, bound with nanobind.
// No schedule logic lives here: every function calls the library that
// stagecraft-opt and stagecraft-translate use, and every library error
// becomes a `ScheduleError` carrying its message. Specs (`.mlir`) reach it
// as problem JSON from stagecraft-translate (stagecraft.load), so the
// module needs no MLIR and the wheel carries none.
//
//===----------------------------------------------------------------------===//

#include "scheduler/formats/ChromeTrace.h"
#include "scheduler/formats/ProblemJson.h"
#include "scheduler/formats/PyTorchCsv.h"
#include "scheduler/formats/Report.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/lower/Program.h"
#include "scheduler/model/CostFit.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/policy/Policy.h"
#include "scheduler/policy/PolicySearch.h"
#include "scheduler/search/DataParallelSearch.h"
#include "scheduler/search/IlpSearch.h"
#include "scheduler/search/Partition.h"
#include "scheduler/search/Recompute.h"
#include "scheduler/search/ScheduleByName.h"

#include "llvm/Support/raw_ostream.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace nb = nanobind;
using namespace stagecraft::pipe;
using namespace stagecraft::pipe::sched;

namespace {

/// A library error, raised in Python as stagecraft.ScheduleError.
struct ScheduleFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T> T take(llvm::Expected<T> value) {
  if (!value)
    throw ScheduleFailure(llvm::toString(value.takeError()));
  return std::move(*value);
}

void check(llvm::Error error) {
  if (error)
    throw ScheduleFailure(llvm::toString(std::move(error)));
}

/// A schedule with the problem it solves and its simulated timeline.
struct PySchedule {
  Problem problem;
  Schedule schedule;
  Timeline timeline;
  std::string kind;
  /// auto only.
  std::string choice;
  double lowerBound = 0.0;
  double memoryAwareBound = 0.0;
  /// auto: no schedule on its placements has a smaller largest span.
  double spanBound = 0.0;
  /// auto with lengths: position k runs the problem's microbatch order[k]
  /// (`problem` is already in this order); empty: as given.
  std::vector<int> microbatchOrder;
  /// Set when the schedule came with explicit communication (a CSV with
  /// SEND_/RECV_ cells).
  std::optional<Program> program;
  /// What the schedule was planned for: "makespan" or "span".
  std::string objective = "makespan";
  /// stagecraft.torch: the lowering and the transport a runner's trial kept
  /// for this plan (None: not tried), so that a saved plan runs them again.
  std::optional<std::string> lowering, transport;

  std::vector<std::string> actions(int rank) const {
    if (rank < 0 || rank >= schedule.numRanks())
      throw nb::index_error(("rank " + std::to_string(rank) +
                             " out of range: the schedule has " +
                             std::to_string(schedule.numRanks()) + " ranks")
                                .c_str());
    std::vector<std::string> out;
    for (const Action &a : schedule.ranks[rank])
      out.push_back(torchName(a));
    return out;
  }

  std::string toCsv(bool comms, bool reduceGrad, bool sharded) const {
    if ((reduceGrad || sharded) && !comms)
      throw ScheduleFailure(
          "to_csv: reduce_grad and sharded need comms=True (torch adds its "
          "own REDUCE_GRAD by rule to a compute-only CSV)");
    if (sharded && !reduceGrad)
      throw ScheduleFailure("to_csv: sharded=True needs reduce_grad=True");
    if (!comms)
      return take(formatPyTorchCsv(schedule));
    // The schedule was verified and simulated when it was made (finish).
    Program lowered = program ? *program
                              : lowerCommunicationEarlyReceives(
                                    problem, schedule, &timeline, true);
    TorchGradientCells gradients{sharded};
    return take(formatPyTorchCsv(lowered, reduceGrad ? &gradients : nullptr));
  }
};

/// "demo_zb_h1", as --pipe-schedule names its schedules.
std::string scheduleName(const PySchedule &s) {
  std::string name = s.problem.name + "_" + s.kind;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

PySchedule finish(Problem problem, Schedule schedule, std::string kind) {
  check(verifySchedule(problem, schedule));
  PySchedule out;
  out.timeline = take(simulate(problem, schedule));
  out.problem = std::move(problem);
  out.schedule = std::move(schedule);
  out.kind = std::move(kind);
  return out;
}

Problem checkedProblem(const Problem &problem) {
  check(validateProblem(problem));
  return problem;
}

/// A compute in torch's spelling ("0F3", "1I2", "2W0", "0B1"): stage, kind
/// letter, microbatch.
Action computeNamed(const std::string &name) {
  size_t k = 0;
  while (k < name.size() && std::isdigit(static_cast<unsigned char>(name[k])))
    ++k;
  const std::string tail = k < name.size() ? name.substr(k + 1) : "";
  const bool digits =
      !tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      });
  const std::string kinds = "FIWB";
  if (k == 0 || k >= name.size() || kinds.find(name[k]) == std::string::npos ||
      !digits || tail.size() > 9 || k > 9)
    throw ScheduleFailure("'" + name +
                          "' is not a compute (STAGE F|I|W|B MICROBATCH, as "
                          "0F3)");
  const ActionKind kind[] = {ActionKind::Forward, ActionKind::BackwardInput,
                             ActionKind::BackwardWeight, ActionKind::Backward};
  return {kind[kinds.find(name[k])], std::stoi(name.substr(0, k)),
          std::stoi(tail)};
}

/// Per rank, (compute, start, end) in the schedule's time unit, as a
/// Timeline for the trace writer; the computes must name the schedule's
/// stages and microbatches.
Timeline measuredTimeline(
    const PySchedule &s,
    const std::vector<std::vector<std::tuple<std::string, double, double>>>
        &measured) {
  if (static_cast<int>(measured.size()) != s.schedule.numRanks())
    throw ScheduleFailure(fmt::format("measured: {} ranks for a schedule of {}",
                                      measured.size(), s.schedule.numRanks()));
  Timeline t;
  t.ranks.resize(measured.size());
  for (size_t r = 0; r < measured.size(); ++r)
    for (const auto &[name, start, end] : measured[r]) {
      Action a = computeNamed(name);
      if (a.stage >= s.problem.numStages() ||
          a.microbatch >= s.problem.microbatches)
        throw ScheduleFailure(fmt::format(
            "measured on rank {}: '{}' is not in this schedule", r, name));
      t.ranks[r].push_back({a, start, end});
    }
  return t;
}

/// A chain of layers from Stage values (partition_layers' input).
std::vector<Layer> layerChain(const std::vector<Stage> &layers) {
  std::vector<Layer> chain;
  for (const Stage &s : layers) {
    Layer l;
    l.name = s.name;
    l.forward = s.forward;
    l.backwardInput = s.backwardInput;
    l.backwardWeight = s.backwardWeight;
    l.activation = s.activation;
    l.weightGrad = s.weightGrad;
    l.params = s.params;
    l.output = s.output;
    chain.push_back(l);
  }
  return chain;
}

/// The stages of \p partition, named s0, s1, ...
std::vector<Stage> namedStages(llvm::ArrayRef<Layer> chain,
                               const Partition &partition) {
  std::vector<Stage> stages = stagesFromPartition(chain, partition);
  for (size_t s = 0; s < stages.size(); ++s)
    stages[s].name = fmt::format("s{}", s);
  return stages;
}

/// A problem from the JSON `stagecraft-translate --pipe-to-problem` writes.
Problem problemFromJson(const std::string &text) {
  return take(readProblemJson(text));
}

PySchedule fromCsv(const Problem &problem, const std::string &text) {
  Problem p = checkedProblem(problem);
  ImportedSchedule imported = take(parsePyTorchCsv(text, p));
  check(verifySchedule(p, imported.schedule));
  if (imported.program)
    check(verifyProgram(p, *imported.program));
  PySchedule out = finish(std::move(p), std::move(imported.schedule), "csv");
  out.program = std::move(imported.program);
  return out;
}

} // namespace

NB_MODULE(_core, m) {
  m.doc() = "Stagecraft's scheduler library: schedules for pipeline-parallel "
            "training, verified and simulated.";
  nb::exception<ScheduleFailure>(m, "ScheduleError", PyExc_ValueError);
  // One source: the project version in the top-level CMakeLists.txt, which
  // the C++ tools' --version prints too.
  m.attr("__version__") = STAGECRAFT_VERSION;

  nb::class_<Stage>(m, "Stage", "One pipeline stage: costs and memory.")
      .def(
          "__init__",
          [](Stage *s, double forward, double backwardInput,
             double backwardWeight, double activation,
             std::optional<double> weightGrad, std::string name,
             std::optional<int> rank, std::optional<double> forwardBackward,
             std::optional<double> recomputed, int layers, double params,
             std::optional<double> selective,
             std::optional<double> selectiveCost,
             std::optional<double> fusedBackward) {
            new (s) Stage();
            s->fusedBackward = fusedBackward;
            s->params = params;
            s->selective = selective;
            s->selectiveCost = selectiveCost;
            s->forward = forward;
            s->backwardInput = backwardInput;
            s->backwardWeight = backwardWeight;
            s->activation = activation;
            s->weightGrad = weightGrad.value_or(activation);
            s->name = std::move(name);
            s->rank = rank;
            s->forwardBackward = forwardBackward;
            s->recomputed = recomputed;
            s->layers = layers;
          },
          nb::arg("forward") = 1.0, nb::arg("backward_input") = 1.0,
          nb::arg("backward_weight") = 1.0, nb::arg("activation") = 1.0,
          nb::arg("weight_grad") = nb::none(), nb::arg("name") = "",
          nb::arg("rank") = nb::none(),
          nb::arg("forward_backward") = nb::none(),
          nb::arg("recomputed") = nb::none(), nb::arg("layers") = 0,
          nb::arg("params") = 0.0, nb::arg("selective") = nb::none(),
          nb::arg("selective_cost") = nb::none(),
          nb::arg("fused_backward") = nb::none(),
          "weight_grad defaults to the activation (as in the DSL); rank pins "
          "the stage (pin all stages or none); recomputed: what a forward "
          "keeps under full recomputation; selective and selective_cost: "
          "what it keeps and what the backward re-runs under selective "
          "recomputation; params: static memory on the stage's rank; "
          "fused_backward: one fused B where it costs other than I + W.")
      .def_rw("name", &Stage::name)
      .def_rw("forward", &Stage::forward)
      .def_rw("backward_input", &Stage::backwardInput)
      .def_rw("backward_weight", &Stage::backwardWeight)
      .def_rw("activation", &Stage::activation)
      .def_rw("weight_grad", &Stage::weightGrad)
      .def_rw("rank", &Stage::rank)
      .def_rw("forward_backward", &Stage::forwardBackward)
      .def_rw("fused_backward", &Stage::fusedBackward,
              "One fused backward B (input and weight gradients at once), "
              "where it costs other than backward_input + backward_weight; "
              "None: their sum. Kinds that fuse the backward (gpipe, 1f1b, "
              "interleaved, DualPipe's F&B) pay it, the split kinds I + W, "
              "so auto weighs splitting against what the split costs.")
      .def_rw("output", &Stage::output,
              "the size of the stage's output per microbatch (and of its "
              "gradient), the spec's output(X): with Problem.links a "
              "transfer takes the link's latency + output / bandwidth")
      .def_rw("recomputed", &Stage::recomputed)
      .def_rw("layers", &Stage::layers)
      .def_rw("params", &Stage::params)
      .def_rw("selective", &Stage::selective)
      .def_rw("selective_cost", &Stage::selectiveCost)
      .def_rw("scaling_linear", &Stage::scalingLinear,
              "with Problem.lengths: costs grow as scaling_linear l + "
              "scaling_quadratic l^2")
      .def_rw("scaling_quadratic", &Stage::scalingQuadratic)
      .def_rw("inputs", &Stage::inputs,
              "a branching pipeline: the indices of the (earlier) stages "
              "whose outputs this stage takes; None: the previous stage; "
              "[]: a source")
      .def("__repr__", [](const Stage &s) {
        return fmt::format("Stage(forward={}, backward_input={}, "
                           "backward_weight={}, activation={}, "
                           "weight_grad={})",
                           s.forward, s.backwardInput, s.backwardWeight,
                           s.activation, s.weightGrad);
      });

  nb::class_<Problem>(m, "Problem",
                      "A pipeline: ranks, microbatches, link latency and "
                      "stages in chain order.")
      .def(
          "to_json",
          [](const Problem &p) {
            std::string text;
            llvm::raw_string_ostream os(text);
            writeProblemJson(os, p);
            return os.str();
          },
          "Every field of the problem as JSON (problem_from_json and "
          "stagecraft-translate --pipe-to-problem use the same form).")
      .def(
          "__init__",
          [](Problem *p, int ranks, int microbatches, std::vector<Stage> stages,
             double latency, std::string name, std::optional<double> capacity) {
            new (p) Problem();
            p->capacity = capacity;
            p->ranks = ranks;
            p->microbatches = microbatches;
            p->latency = latency;
            p->name = std::move(name);
            p->stages = std::move(stages);
            for (size_t k = 0; k < p->stages.size(); ++k)
              if (p->stages[k].name.empty())
                p->stages[k].name = "s" + std::to_string(k);
            check(validateProblem(*p));
          },
          nb::arg("ranks"), nb::arg("microbatches"), nb::arg("stages"),
          nb::arg("latency") = 0.0, nb::arg("name") = "pipeline",
          nb::arg("capacity") = nb::none(),
          "capacity: every rank's memory (params + live activations); "
          "schedules recompute to fit it.")
      .def_rw("name", &Problem::name)
      .def_rw("ranks", &Problem::ranks)
      .def("is_chain", &Problem::isChain,
           "whether every stage takes the previous one's output (no "
           "branching inputs)")
      .def_rw("microbatches", &Problem::microbatches)
      .def_rw("latency", &Problem::latency)
      .def_rw("message_overhead", &Problem::messageOverhead,
              "The runtime's own work per message a compute sends to "
              "another rank, added to that compute (torch's runtime posts "
              "its sends on the compute's path; calibrate measures it).")
      .def_rw("receive_overhead", &Problem::receiveOverhead,
              "The runtime's own work per message a compute receives from "
              "another rank, on its rank just before it (torch's runtime "
              "posts each receive right before the compute); it overlaps "
              "with waiting for the message. calibrate measures it.")
      .def_rw("stages", &Problem::stages)
      .def_prop_rw(
          "links",
          [](const Problem &p) -> nb::object {
            if (!p.links)
              return nb::none();
            const Problem::Links &l = *p.links;
            return nb::make_tuple(
                l.node, nb::make_tuple(l.intra.latency, l.intra.bandwidth),
                nb::make_tuple(l.inter.latency, l.inter.bandwidth));
          },
          [](Problem &p,
             std::optional<std::tuple<int, std::tuple<double, double>,
                                      std::tuple<double, double>>>
                 links) {
            if (!links) {
              p.links.reset();
              return;
            }
            auto [node, intra, inter] = *links;
            p.links = Problem::Links{node,
                                     {std::get<0>(intra), std::get<1>(intra)},
                                     {std::get<0>(inter), std::get<1>(inter)}};
          },
          nb::arg("links").none(),
          "(node, (intra latency, bandwidth), (inter latency, bandwidth)) "
          "or None, the spec's links(...): ranks in groups of node; a "
          "transfer of a stage's output takes the crossed link's latency + "
          "output / bandwidth (None: every transfer takes `latency`)")
      .def_rw("capacity", &Problem::capacity)
      .def_rw("lengths", &Problem::lengths,
              "each microbatch's sequence length (empty: all alike); the "
              "stages' costs and memory are for reference_length")
      .def_rw("reference_length", &Problem::referenceLength)
      .def(
          "validate", [](const Problem &p) { check(validateProblem(p)); },
          "Raises ScheduleError unless the problem is well formed.")
      .def("__repr__", [](const Problem &p) {
        return fmt::format("Problem(name='{}', ranks={}, microbatches={}, "
                           "stages={}, latency={})",
                           p.name, p.ranks, p.microbatches, p.numStages(),
                           p.latency);
      });

  nb::class_<PySchedule>(m, "Schedule",
                         "A verified per-rank schedule and its simulation.")
      .def_ro("problem", &PySchedule::problem)
      .def_ro("kind", &PySchedule::kind)
      .def_ro("choice", &PySchedule::choice, "auto: the candidate that won")
      .def_ro("lower_bound", &PySchedule::lowerBound,
              "auto: no placement it considers ends sooner (memory ignored)")
      .def_ro("microbatch_order", &PySchedule::microbatchOrder,
              "auto with Problem.lengths: position k runs the problem's "
              "microbatch microbatch_order[k] (schedule.problem is in this "
              "order); empty: as given")
      .def_ro("memory_aware_bound", &PySchedule::memoryAwareBound,
              "auto: the bound that also honours the memory limit")
      .def_ro("span_bound", &PySchedule::spanBound,
              "auto: no schedule on its placements has a smaller span (each "
              "rank's span covers its own work)")
      .def(
          "_with_origin",
          [](const PySchedule &s, std::string kind, std::string choice,
             double lowerBound, double memoryAwareBound,
             std::optional<double> spanBound,
             std::optional<std::vector<int>> microbatchOrder,
             std::optional<std::string> objective) {
            PySchedule out = s;
            out.kind = std::move(kind);
            out.choice = std::move(choice);
            out.lowerBound = lowerBound;
            out.memoryAwareBound = memoryAwareBound;
            if (spanBound)
              out.spanBound = *spanBound;
            if (microbatchOrder)
              out.microbatchOrder = std::move(*microbatchOrder);
            if (objective)
              out.objective =
                  take(parseObjective(*objective)) == Objective::Span
                      ? "span"
                      : "makespan";
            return out;
          },
          nb::arg("kind"), nb::arg("choice"), nb::arg("lower_bound"),
          nb::arg("memory_aware_bound"), nb::arg("span_bound") = nb::none(),
          nb::arg("microbatch_order") = nb::none(),
          nb::arg("objective") = nb::none(),
          "A copy naming the kind and search figures of the plan it was "
          "read from (a broadcast plan, a plan file: both carry the "
          "schedule as CSV).")
      .def_ro("objective", &PySchedule::objective,
              "what the schedule was planned for: makespan or span")
      .def_rw("lowering", &PySchedule::lowering, nb::arg("value").none(),
              "stagecraft.torch: the lowering a runner's trial kept for this "
              "plan (None: not tried); a saved plan keeps it")
      .def_rw("transport", &PySchedule::transport, nb::arg("value").none(),
              "stagecraft.torch: the transport a runner's trial kept for "
              "this plan (None: not tried); a saved plan keeps it")
      .def_prop_ro(
          "has_communication",
          [](const PySchedule &s) { return s.program.has_value(); },
          "whether the schedule came with its own SEND_/RECV_ cells (a CSV "
          "read with them): to_csv(comms=True) gives those")
      .def_prop_ro("makespan",
                   [](const PySchedule &s) { return s.timeline.makespan; })
      .def_prop_ro("bubble_ratio",
                   [](const PySchedule &s) { return s.timeline.bubbleRatio; })
      .def_prop_ro(
          "peak_memory",
          [](const PySchedule &s) {
            std::vector<double> peaks;
            for (int r = 0, e = s.timeline.peakMemory.size(); r < e; ++r)
              peaks.push_back(s.timeline.peak(r));
            return peaks;
          },
          "Per rank: params + the most live activations")
      .def_prop_ro(
          "recompute",
          [](const PySchedule &s) {
            // Per stage, per microbatch: "none", "full" or "selective".
            std::vector<std::vector<std::string>> table;
            for (int st = 0; st < s.problem.numStages(); ++st) {
              table.emplace_back();
              for (int m = 0; m < s.problem.microbatches; ++m)
                table.back().push_back(
                    recomputeName(s.schedule.recompute.at(st, m)).str());
            }
            return table;
          },
          "recompute[stage][microbatch]: none, full or selective")
      .def_prop_ro("busy", [](const PySchedule &s) { return s.timeline.busy; })
      .def_prop_ro("span", [](const PySchedule &s) { return s.timeline.span; })
      .def_prop_ro("placement",
                   [](const PySchedule &s) { return s.schedule.placement; })
      .def_prop_ro("num_ranks",
                   [](const PySchedule &s) { return s.schedule.numRanks(); })
      .def("actions", &PySchedule::actions, nb::arg("rank"),
           "Rank's compute actions in order, in torch's spelling: 0F0, 1I3, "
           "2W3, 0B1, (0F3;3B1)OVERLAP_F_B.")
      .def(
          "with_recompute",
          [](const PySchedule &s,
             const std::vector<std::vector<std::string>> &table) {
            Schedule schedule = s.schedule;
            schedule.recompute = RecomputeTable();
            const int n = s.problem.numStages(), m = s.problem.microbatches;
            if (static_cast<int>(table.size()) != n)
              throw ScheduleFailure(fmt::format(
                  "with_recompute: {} rows for {} stages", table.size(), n));
            for (int st = 0; st < n; ++st) {
              if (static_cast<int>(table[st].size()) != m)
                throw ScheduleFailure(fmt::format(
                    "with_recompute: stage {} has {} entries for {} "
                    "microbatches",
                    st, table[st].size(), m));
              for (int mb = 0; mb < m; ++mb) {
                std::optional<Recompute> mode = parseRecompute(table[st][mb]);
                if (!mode)
                  throw ScheduleFailure("with_recompute: '" + table[st][mb] +
                                        "' is not none, full or selective");
                schedule.recompute.set(st, mb, *mode, n, m);
              }
            }
            PySchedule out = finish(s.problem, std::move(schedule), s.kind);
            out.choice = s.choice;
            out.lowerBound = s.lowerBound;
            out.memoryAwareBound = s.memoryAwareBound;
            out.spanBound = s.spanBound;
            out.microbatchOrder = s.microbatchOrder;
            out.objective = s.objective;
            out.lowering = s.lowering;
            out.transport = s.transport;
            check(checkCapacity(out.problem, out.timeline));
            return out;
          },
          nb::arg("table"),
          "This schedule with recompute[stage][microbatch] set (none, full "
          "or selective), verified, simulated and checked against the "
          "capacity.")
      .def(
          "torch_checkpoint_stages",
          [](const PySchedule &s) {
            return take(torchCheckpointStages(s.problem, s.schedule));
          },
          "The stages whose every forward recomputes in full (torch runs "
          "them under torch.utils.checkpoint); raises ScheduleError for a "
          "per-microbatch mix or selective recomputation, which torch's "
          "runtime cannot run.")
      .def(
          "timeline",
          [](const PySchedule &s, int rank) {
            if (rank < 0 || rank >= s.schedule.numRanks())
              throw nb::index_error("rank out of range");
            std::vector<std::tuple<std::string, double, double>> out;
            for (const TimedAction &a : s.timeline.ranks[rank])
              out.emplace_back(torchName(a.action), a.start, a.end);
            return out;
          },
          nb::arg("rank"),
          "Rank's simulated computes in run order: (action in torch's "
          "spelling, start, end).")
      .def(
          "to_chrome_trace",
          [](const PySchedule &s,
             std::optional<std::vector<
                 std::vector<std::tuple<std::string, double, double>>>>
                 measured,
             double microsPerUnit) {
            ChromeTraceWriter writer(microsPerUnit);
            if (measured)
              writer.addTimeline("measured", s.problem,
                                 measuredTimeline(s, *measured));
            writer.addTimeline("simulated", s.problem, s.timeline);
            return writer.str();
          },
          nb::arg("measured") = nb::none(), nb::arg("micros_per_unit") = 1000.0,
          "Chrome trace JSON (Perfetto, chrome://tracing): the simulated "
          "timeline and, when given, a measured one beside it on the same "
          "time axis: measured[rank] is a list of (compute in torch's "
          "spelling, start, end) in the schedule's time unit; "
          "micros_per_unit: trace microseconds per unit (1000: the unit is "
          "a millisecond).")
      .def("to_csv", &PySchedule::toCsv, nb::arg("comms") = false,
           nb::arg("reduce_grad") = false, nb::arg("sharded") = false,
           "torch.distributed.pipelining CSV, one row per rank; comms=True "
           "adds the SEND_/RECV_ cells Stagecraft lowered and verified; "
           "reduce_grad=True (with comms) each stage's REDUCE_GRAD after its "
           "last gradient action and its WAIT_REDUCE_GRAD deferred to the "
           "rank's next reduction or its row's end; sharded=True also each "
           "stage's UNSHARD first and RESHARD after its wait (FSDP).")
      .def(
          "summary",
          [](const PySchedule &s, int width) {
            return formatSummary(s.problem, s.schedule, s.timeline,
                                 scheduleName(s), width);
          },
          nb::arg("width") = 100, "The text of --pipe-to-summary.")
      .def("__repr__", [](const PySchedule &s) {
        return fmt::format("Schedule(kind='{}', ranks={}, makespan={:.6g}, "
                           "bubble_ratio={:.4f})",
                           s.kind, s.schedule.numRanks(), s.timeline.makespan,
                           s.timeline.bubbleRatio);
      });

  m.def(
      "schedule",
      [](const Problem &problem, const std::string &kind, int chunks,
         std::optional<double> memoryLimit, double timeLimit, int folds,
         std::optional<std::string> recompute, const std::string &objective,
         const std::vector<std::pair<Policy, std::map<std::string, int64_t>>>
             &policies,
         bool libraryPolicies) {
        Problem p = checkedProblem(problem);
        KindRequest request;
        request.kind = kind;
        for (const auto &[policy, fixed] : policies)
          request.policies.push_back({policy, fixed});
        request.libraryPolicies = libraryPolicies;
        request.chunks = chunks;
        request.memoryLimit = memoryLimit.value_or(0.0);
        request.timeLimit = timeLimit;
        request.folds = folds;
        request.objective = take(parseObjective(objective));
        if (recompute) {
          request.recompute = parseRecomputePolicy(*recompute);
          if (!request.recompute)
            throw ScheduleFailure("recompute='" + *recompute +
                                  "' is not one of none, full, selective, "
                                  "auto");
        }
        if (chunks < 0)
          throw ScheduleFailure("chunks must be >= 0");
        if (!(timeLimit > 0.0) || !std::isfinite(timeLimit))
          throw ScheduleFailure("time_limit must be a finite number of "
                                "seconds > 0");
        if (memoryLimit && (!std::isfinite(*memoryLimit) || *memoryLimit < 0))
          throw ScheduleFailure("memory_limit must be a finite number >= 0");
        KindResult result;
        {
          nb::gil_scoped_release release;
          llvm::Expected<KindResult> found = scheduleByName(p, request);
          if (!found) {
            std::string message = llvm::toString(found.takeError());
            nb::gil_scoped_acquire acquire;
            throw ScheduleFailure("cannot schedule pipeline @" + p.name +
                                  " as " + kind + ": " + message);
          }
          result = std::move(*found);
        }
        if (!result.microbatchOrder.empty())
          p = reorderedMicrobatches(p, result.microbatchOrder);
        PySchedule out = finish(std::move(p), std::move(result.schedule), kind);
        out.microbatchOrder = result.microbatchOrder;
        out.choice = result.choice;
        out.lowerBound = result.lowerBound;
        out.memoryAwareBound = result.memoryAwareBound;
        out.spanBound = result.spanBound;
        out.objective = objective;
        return out;
      },
      nb::arg("problem"), nb::arg("kind") = "1f1b", nb::arg("chunks") = 0,
      nb::arg("memory_limit") = nb::none(), nb::arg("time_limit") = 10.0,
      nb::arg("folds") = 2, nb::arg("recompute") = nb::none(),
      nb::arg("objective") = "makespan",
      nb::arg("policies") =
          std::vector<std::pair<Policy, std::map<std::string, int64_t>>>(),
      nb::arg("library_policies") = true,
      "Schedule the problem as --pipe-schedule does: kind is gpipe, 1f1b, "
      "interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipev, helix, auto "
      "(which also tries `policies`, (Policy, fixed parameter values) "
      "pairs, and with library_policies the library's, each with its "
      "parameters searched within the memory limit), policy-search (the "
      "one policy of `policies`, its free parameters searched) or exact "
      "(small problems: proven optimal over auto's placements, or the best "
      "found in time_limit; `choice` says which) or, where the build has "
      "its solver (CBC; the wheel does not), ilp; "
      "recompute is none, full, selective or auto (default: auto with a "
      "capacity, else none; helix: full); objective is makespan (one step "
      "between barriers, as torch's runtime runs) or span (the largest "
      "per-rank span, the steady-state step when steps overlap; auto and the "
      "zero-bubble kinds follow it). The result is verified and simulated.");
  m.def(
      "fit_costs",
      [](const Problem &problem,
         const std::vector<std::tuple<int, int, std::string, double, double,
                                      double>> &computes,
         const std::vector<double> &overhead, const std::string &statistic,
         bool reproduce, const std::map<int, double> &stepTimes,
         const std::vector<int> &overlapped) {
        std::vector<MeasuredCompute> measured;
        for (const auto &[rank, step, name, start, end, own] : computes)
          measured.push_back({rank, step, computeNamed(name), start, end, own});
        for (int i : overlapped) {
          if (i < 0 || i >= static_cast<int>(measured.size()))
            throw nb::index_error("overlapped: no such compute");
          measured[i].overlapsNext = true;
        }
        if (statistic != "median" && statistic != "mean")
          throw ScheduleFailure("statistic='" + statistic +
                                "': expected 'median' or 'mean'");
        FitOptions options;
        options.statistic =
            statistic == "mean" ? CostStatistic::Mean : CostStatistic::Median;
        options.reproduce = reproduce;
        options.stepTimes = stepTimes;
        CostFit fit = take(fitCosts(problem, measured, overhead, options));
        nb::dict out;
        out["problem"] = withFittedCosts(problem, fit);
        out["forward"] = fit.forward;
        out["backward_input"] = fit.backwardInput;
        out["backward_weight"] = fit.backwardWeight;
        out["backward"] = fit.backward;
        out["samples"] = fit.samples;
        out["latency"] = fit.latency;
        out["message_overhead"] = fit.messageOverhead;
        out["receive_overhead"] = fit.receiveOverhead;
        out["stretch"] = fit.stretch;
        out["replayed"] = fit.replayed;
        out["unstretched_ratio"] = fit.unstretchedRatio;
        out["overhead"] = fit.overhead;
        out["steps"] = fit.steps;
        return out;
      },
      nb::arg("problem"), nb::arg("computes"), nb::arg("overhead"),
      nb::arg("statistic") = "median", nb::arg("reproduce") = true,
      nb::arg("step_times") = std::map<int, double>(),
      nb::arg("overlapped") = std::vector<int>(),
      "The costs of the scheduler's fit (as stagecraft-run --calibrate): "
      "computes are (rank, step, compute in torch's spelling, start ms, end "
      "ms, ms of the runtime's own work it brought with it); overhead, per "
      "rank, ms per compute outside computes and waits not so attributed. "
      "Returns per-stage costs (the `statistic`, 'median' or 'mean', of "
      "each kind's computes, with the overhead added: forward, "
      "backward_input, backward_weight, fused backward; 0 where not run), "
      "the link latency, with `reproduce` the stretch of every cost that "
      "makes the simulated makespans of the measured steps (each replayed "
      "in its ranks' order) meet their times (`step_times`, ms by step; a "
      "step not given took its compute window; `overlapped`: the indices of "
      "the computes that ran with their rank's next one as one overlapped "
      "F&B of the plan), and `problem` with those costs (a stage measured "
      "fused splits its B in the ratio of the problem's own I and W).");
  nb::class_<Policy>(m, "Policy",
                     "A schedule family (docs/policies.md): instantiates for "
                     "any pipeline's ranks, microbatches and chunks.")
      .def(
          "__init__",
          [](Policy *self, const std::string &text) {
            new (self) Policy(take(parsePolicy(text)));
          },
          nb::arg("text"),
          "Parses a policy's text; ScheduleError names the line and column "
          "of what is wrong.")
      .def_ro("name", &Policy::name)
      .def_prop_ro(
          "params",
          [](const Policy &p) {
            std::vector<std::tuple<std::string, int64_t, int64_t, int64_t>> out;
            for (const Policy::Param &q : p.params)
              out.emplace_back(q.name, q.lo, q.hi, q.value);
            return out;
          },
          "(name, lo, hi, default) of each parameter")
      .def(
          "instantiate",
          [](const Policy &policy, const Problem &problem,
             const std::map<std::string, int64_t> &params) {
            Problem p = checkedProblem(problem);
            Schedule schedule = take(instantiatePolicy(policy, p, params));
            PySchedule out =
                finish(std::move(p), std::move(schedule), "policy");
            out.choice = describePolicyChoice(policy, params);
            return out;
          },
          nb::arg("problem"),
          nb::arg("params") = std::map<std::string, int64_t>(),
          "The schedule the policy gives the problem (kind 'policy', choice "
          "the policy's name and parameter values), verified and "
          "simulated.")
      .def(
          "search",
          [](const Policy &policy, const Problem &problem,
             std::optional<double> memoryLimit, const std::string &objective,
             const std::map<std::string, int64_t> &fixed) {
            Problem p = checkedProblem(problem);
            Objective goal = take(parseObjective(objective));
            PolicySearchResult found;
            {
              nb::gil_scoped_release release;
              llvm::Expected<PolicySearchResult> r = searchPolicy(
                  policy, p, fixed, memoryLimit.value_or(0.0), goal);
              if (!r) {
                std::string message = llvm::toString(r.takeError());
                nb::gil_scoped_acquire acquire;
                throw ScheduleFailure(message);
              }
              found = std::move(*r);
            }
            PySchedule out =
                finish(std::move(p), std::move(found.schedule), "policy");
            out.choice = describePolicyChoice(policy, found.params);
            out.objective = objective;
            return out;
          },
          nb::arg("problem"), nb::arg("memory_limit") = nb::none(),
          nb::arg("objective") = "makespan",
          nb::arg("fixed") = std::map<std::string, int64_t>(),
          "The best schedule over every combination of the parameters not in "
          "`fixed` (whole ranges), every rank's activation peak within "
          "memory_limit (None: no limit), by objective; a tie goes to the "
          "combination found first (declaration order, each from its low "
          "end). Its choice names the values.")
      .def(
          "verify",
          [](const Policy &policy, std::pair<int, int> ranks,
             std::pair<int, int> microbatches, std::pair<int, int> chunks,
             std::optional<Stage> stage, double latency,
             const std::map<std::string, int64_t> &params) {
            PolicyFamily family;
            family.ranksLo = ranks.first;
            family.ranksHi = ranks.second;
            family.microbatchesLo = microbatches.first;
            family.microbatchesHi = microbatches.second;
            family.chunksLo = chunks.first;
            family.chunksHi = chunks.second;
            if (stage)
              family.stage = *stage;
            family.latency = latency;
            if (family.ranksLo < 1 || family.microbatchesLo < 1 ||
                family.chunksLo < 1 || family.ranksLo > family.ranksHi ||
                family.microbatchesLo > family.microbatchesHi ||
                family.chunksLo > family.chunksHi)
              throw ScheduleFailure("verify: each range is (lo, hi) with 1 "
                                    "<= lo <= hi");
            PolicyFamilyReport report;
            {
              nb::gil_scoped_release release;
              llvm::Expected<PolicyFamilyReport> found =
                  verifyPolicyFamily(policy, family, params);
              if (!found) {
                std::string message = llvm::toString(found.takeError());
                nb::gil_scoped_acquire acquire;
                throw ScheduleFailure(message);
              }
              report = *found;
            }
            nb::dict out;
            out["held"] = report.held;
            out["skipped"] = report.skipped;
            return out;
          },
          nb::arg("ranks") = std::pair<int, int>(2, 8),
          nb::arg("microbatches") = std::pair<int, int>(1, 32),
          nb::arg("chunks") = std::pair<int, int>(1, 1),
          nb::arg("stage") = nb::none(), nb::arg("latency") = 0.0,
          nb::arg("params") = std::map<std::string, int64_t>(),
          "Instantiates and verifies the policy at every point of the "
          "ranges (inclusive): dependencies, deadlock freedom of the "
          "compute order and of its lowered communication. Returns "
          "{'held': N, 'skipped': K} (K points outside the policy's "
          "requires); raises ScheduleError at the first failing point, "
          "naming it.");
  m.def(
      "plan_data_parallel",
      [](const Problem &problem, int degree, std::vector<double> gradBytes,
         const std::string &sharding, int shardGroup, double latency,
         double bandwidth, double interLatency, double interBandwidth,
         double optimizerPerByte, std::optional<double> memoryLimit,
         double timeLimit, bool buckets) {
        Problem p = checkedProblem(problem);
        DataParallel dp;
        dp.degree = degree;
        dp.sharding = take(parseSharding(sharding));
        dp.shardGroup = shardGroup;
        dp.latency = latency;
        dp.bandwidth = bandwidth;
        dp.interLatency = interLatency;
        dp.interBandwidth = interBandwidth;
        dp.gradBytes = std::move(gradBytes);
        dp.optimizerPerByte = optimizerPerByte;
        if (!(timeLimit > 0.0) || !std::isfinite(timeLimit))
          throw ScheduleFailure("time_limit must be a finite number of "
                                "seconds > 0");
        KindRequest request;
        request.memoryLimit = memoryLimit.value_or(0.0);
        request.timeLimit = timeLimit;
        DataParallelPlan plan;
        {
          nb::gil_scoped_release release;
          llvm::Expected<DataParallelPlan> found =
              planDataParallel(p, dp, request, nullptr, buckets);
          if (!found) {
            std::string message = llvm::toString(found.takeError());
            nb::gil_scoped_acquire acquire;
            throw ScheduleFailure("cannot plan pipeline @" + p.name +
                                  " inside data parallelism: " + message);
          }
          plan = std::move(*found);
        }
        nb::dict out;
        out["step"] = plan.dp.step;
        out["exposed"] = plan.dp.exposed;
        out["bound"] = plan.bound;
        out["shift"] = plan.dp.shift;
        out["held_bytes"] = plan.dp.heldBytes;
        out["choice"] = plan.schedule;
        out["placement"] = plan.placement;
        if (!plan.microbatchOrder.empty())
          p = reorderedMicrobatches(p, plan.microbatchOrder);
        PySchedule schedule =
            finish(std::move(p), std::move(plan.plan), "data-parallel");
        schedule.microbatchOrder = plan.microbatchOrder;
        schedule.choice = plan.schedule + "; " + plan.placement;
        out["schedule"] = nb::cast(std::move(schedule), nb::rv_policy::move);
        return out;
      },
      nb::arg("problem"), nb::arg("degree"), nb::arg("grad_bytes"),
      nb::arg("sharding") = "none", nb::arg("shard_group") = 1,
      nb::arg("latency") = 0.0, nb::arg("bandwidth") = 1.0,
      nb::arg("inter_latency") = 0.0, nb::arg("inter_bandwidth") = 1.0,
      nb::arg("optimizer_per_byte") = 0.0, nb::arg("memory_limit") = nb::none(),
      nb::arg("time_limit") = 2.0, nb::arg("buckets") = true,
      "The pipeline inside data parallelism (docs/data-parallel.md): "
      "`degree` replicas, each stage's gradient bytes, sharding none, full "
      "or hybrid (`shard_group` replicas a group), the data-parallel link "
      "(time per ring step, bytes per time unit; inter_* across hybrid's "
      "groups) and the optimizer's time per gradient byte. Chooses the "
      "schedule (every kind within the memory limit and auto's, each also "
      "with W after I), the reductions' placement and bucket size for the "
      "shortest step (buckets=False: whole-stage reductions only, as "
      "torch's runtime runs them). Returns {'step', 'exposed' (per rank), "
      "'bound', "
      "'shift', 'held_bytes', 'choice', 'placement', 'schedule'}.");
  m.def(
      "default_memory_limit",
      [](const Problem &problem) -> std::optional<double> {
        Problem p = checkedProblem(problem);
        if (p.hasCapacity())
          return std::nullopt;
        std::vector<double> peaks = take(oneFOneBPeakMemory(p));
        return *std::max_element(peaks.begin(), peaks.end());
      },
      nb::arg("problem"),
      "The memory every rank stays within when no memory_limit is given: "
      "the highest per-rank peak of 1F1B on the problem (auto, and "
      "stagecraft.torch.plan's torch orders, plan within it); None when "
      "the problem has a capacity, which governs instead.");
  m.def(
      "partition_layers",
      [](const std::vector<Stage> &layers, int stages,
         std::optional<std::vector<double>> budget,
         std::optional<std::vector<int>> inFlight,
         std::optional<std::vector<double>> speed) {
        if (stages < 1 || stages > static_cast<int>(layers.size()))
          throw ScheduleFailure(fmt::format(
              "partition_layers: {} stages of {} layers: each stage needs at "
              "least one layer",
              stages, layers.size()));
        auto perStage = [&](const auto &values, const char *what) {
          if (values && static_cast<int>(values->size()) != stages)
            throw ScheduleFailure(
                fmt::format("partition_layers: {} has {} values for {} stages",
                            what, values->size(), stages));
        };
        perStage(budget, "budget");
        perStage(inFlight, "in_flight");
        perStage(speed, "speed");
        std::vector<Layer> chain = layerChain(layers);
        PartitionTarget target;
        target.stages = stages;
        target.speed = speed.value_or(std::vector<double>(stages, 1.0));
        target.budget = budget.value_or(std::vector<double>(
            stages, std::numeric_limits<double>::infinity()));
        target.inFlight = inFlight.value_or(std::vector<int>(stages, 1));
        Partition partition = take(partitionLayers(chain, target));
        return std::make_pair(partition.first, namedStages(chain, partition));
      },
      nb::arg("layers"), nb::arg("stages"), nb::arg("budget") = nb::none(),
      nb::arg("in_flight") = nb::none(), nb::arg("speed") = nb::none(),
      "The exact cut of a chain of layers (each a Stage: its costs, "
      "activation, params and output) into `stages` contiguous non-empty "
      "stages whose slowest (F + I + W) / speed is least, each stage within "
      "its `budget` (params + in_flight forwards' activations; default "
      "unbounded). Returns (first, stages): stage s holds layers "
      "first[s]..first[s+1]-1, and its Stage sums theirs (named s0, s1, "
      "...). Raises ScheduleError naming the stage when nothing fits.");
  m.def(
      "stages_from_partition",
      [](const std::vector<Stage> &layers, const std::vector<int> &first) {
        int n = static_cast<int>(layers.size());
        bool ok = first.size() >= 2 && first.front() == 0 && first.back() == n;
        for (size_t s = 0; ok && s + 1 < first.size(); ++s)
          ok = first[s] < first[s + 1];
        if (!ok)
          throw ScheduleFailure(fmt::format(
              "stages_from_partition: first = [{}] is not 0 < ... < {} "
              "(each stage needs at least one layer)",
              fmt::join(first, ", "), n));
        std::vector<Layer> chain = layerChain(layers);
        Partition partition;
        partition.first = first;
        return namedStages(chain, partition);
      },
      nb::arg("layers"), nb::arg("first"),
      "The stages of a given cut of a chain of layers: stage s holds "
      "layers first[s]..first[s+1]-1 and sums their costs, activation, "
      "params and gradient bytes, sends its last layer's output and is "
      "named s<s> (what partition_layers returns for its own cut).");
  m.def("problem_from_json", &problemFromJson, nb::arg("text"),
        "The Problem of the JSON `stagecraft-translate --pipe-to-problem` "
        "writes (stagecraft.load runs it on a .mlir spec), validated.");
  m.def(
      "data_parallel_from_json",
      [](const std::string &text) -> std::optional<nb::dict> {
        std::optional<DataParallel> dp;
        take(readProblemJson(text, &dp));
        if (!dp)
          return std::nullopt;
        nb::dict out;
        out["degree"] = dp->degree;
        out["grad_bytes"] = dp->gradBytes;
        out["sharding"] = shardingName(dp->sharding).str();
        out["shard_group"] = dp->shardGroup;
        out["latency"] = dp->latency;
        out["bandwidth"] = dp->bandwidth;
        out["inter_latency"] = dp->interLatency;
        out["inter_bandwidth"] = dp->interBandwidth;
        out["optimizer_per_byte"] = dp->optimizerPerByte;
        return out;
      },
      nb::arg("text"),
      "The data parallelism around the pipeline of a problem JSON (a "
      "spec's `data_parallel(...)` and `gradient(X)`), as keyword arguments "
      "of plan_data_parallel (and stagecraft.torch.plan's data_parallel); "
      "None when it has none.");
  m.def("from_csv", &fromCsv, nb::arg("problem"), nb::arg("text"),
        "A torch CSV schedule of the problem, verified (dependencies, "
        "deadlock, and with SEND_/RECV_ cells the matching of every "
        "transfer) and simulated.");
  m.def(
      "kinds",
      []() {
        std::vector<std::string> names;
        for (int k = 0; k <= static_cast<int>(ScheduleKind::Helix); ++k)
          names.push_back(scheduleKindName(static_cast<ScheduleKind>(k)).str());
        names.push_back("auto");
        names.push_back("exact");
        if (ilpAvailable())
          names.push_back("ilp");
        return names;
      },
      "Every schedule kind.");
}
