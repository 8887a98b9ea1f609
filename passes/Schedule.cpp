//===- Schedule.cpp - --pipe-schedule -------------------------------------===//
//
// Generates a schedule for every pipeline with the scheduler library and
// materializes it as a `pipe.schedule` op after the pipeline.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/PipeModel.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/policy/Library.h"
#include "scheduler/policy/Policy.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/DataParallelSearch.h"
#include "scheduler/search/LayerSearch.h"
#include "scheduler/search/ScheduleByName.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>

#include "mlir/IR/SymbolTable.h"

namespace stagecraft::pipe {
#define GEN_PASS_DEF_PIPESCHEDULEPASS
#include "passes/Passes.h.inc"
} // namespace stagecraft::pipe

using namespace mlir;
using namespace stagecraft::pipe;

/// What to do about a failed schedule, for the errors whose fix is not in
/// the message itself.
static std::optional<std::string> hintFor(llvm::StringRef kind,
                                          llvm::StringRef message) {
  if (message.contains("V placement needs"))
    return std::string("split the model into twice as many stages as ranks, "
                       "or use zb-h1 or zb-h2, which take any number of "
                       "stages from one per rank");
  if (message.contains("interleaved placement with"))
    return std::string("leave chunks= out (stages / ranks), or give the "
                       "pipeline chunks x ranks stages");
  if (message.contains("exceeds memory-limit="))
    return std::string("raise memory-limit=, use a kind with a lower peak "
                       "(1f1b, zb-h1), or kind=auto, which searches under "
                       "the limit");
  if (message.contains("nothing fits"))
    return std::string("raise capacity(X), give stages a smaller "
                       "memory(recomputed = R) or selective option, or use "
                       "kind=auto, which searches kinds with fewer "
                       "microbatches in flight");
  if (message.contains("above its capacity") &&
      message.contains("recompute=auto fits"))
    return std::string("drop recompute= (auto is the default with a "
                       "capacity) or pass recompute=auto");
  if (message.contains("needs attention(...)"))
    return std::string("helix needs attention(forward = ..., backward = ...) "
                       "on every stage but the last (see "
                       "examples/helix.mlir)");
  return std::nullopt;
}

namespace {
struct SchedulePass
    : public stagecraft::pipe::impl::PipeSchedulePassBase<SchedulePass> {
  using PipeSchedulePassBase::PipeSchedulePassBase;

  /// Checks integer options before LLVM's parser sees them (its own message
  /// for an out-of-range integer goes to stderr, leaving the pipeline error
  /// empty) and every value after: finite, in range.
  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    llvm::SmallVector<StringRef> parts;
    options.split(parts, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef part : parts) {
      auto [key, value] = part.split('=');
      if (key != "chunks" && key != "folds")
        continue;
      long long parsed = 0;
      if (value.getAsInteger(10, parsed) || parsed < 0 ||
          parsed > std::numeric_limits<int>::max())
        return errorHandler(fmt::format(
            "pipe-schedule: {}={} is not an integer in [0, {}]", key.str(),
            value.str(), std::numeric_limits<int>::max()));
    }
    if (failed(PipeSchedulePassBase::initializeOptions(options, errorHandler)))
      return failure();
    if (!std::isfinite(memoryLimit) || memoryLimit < 0.0)
      return errorHandler(fmt::format(
          "pipe-schedule: memory-limit={} must be a finite number >= 0 (0: "
          "1F1B's highest peak for auto, no limit for the fixed kinds)",
          double(memoryLimit)));
    if (!std::isfinite(timeLimit) || timeLimit <= 0.0)
      return errorHandler(
          fmt::format("pipe-schedule: time-limit={} must be a finite number "
                      "of seconds > 0",
                      double(timeLimit)));
    if (!recompute.empty() && !sched::parseRecomputePolicy(recompute))
      return errorHandler(fmt::format(
          "pipe-schedule: recompute={} is not one of none, full, selective, "
          "auto",
          std::string(recompute)));
    if (folds < 1)
      return errorHandler(fmt::format(
          "pipe-schedule: folds={} must be at least 1", int(folds)));
    if (llvm::Expected<sched::Objective> o = sched::parseObjective(objective);
        !o)
      return errorHandler("pipe-schedule: " + llvm::toString(o.takeError()));
    if (reduce != "torch" && reduce != "bucketed")
      return errorHandler(
          fmt::format("pipe-schedule: reduce={} is not one of torch, bucketed",
                      std::string(reduce)));
    if (!std::isfinite(bucket) || bucket <= 0.0)
      return errorHandler(fmt::format(
          "pipe-schedule: bucket={} must be a finite number of bytes > 0",
          double(bucket)));
    if (maxActions < 1)
      return errorHandler(
          fmt::format("pipe-schedule: max-actions={} must be at least 1",
                      int64_t(maxActions)));
    return success();
  }

  /// policy-file= or policy=@NAME: the policy and its parameter values;
  /// \p policyOp is set to the op for policy=.
  llvm::Expected<std::pair<sched::Policy, sched::PolicyParams>>
  loadPolicy(SymbolTable &symbols, PolicyOp &policyOp) const {
    auto fail = [](const std::string &what) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
    };
    llvm::Expected<sched::PolicyParams> values =
        sched::parsePolicyParams(params.getValue());
    if (!values)
      return values.takeError();
    if (!policy.empty()) {
      StringRef name = StringRef(policy.getValue()).ltrim('@');
      policyOp = symbols.lookup<PolicyOp>(name);
      if (!policyOp) {
        if (const sched::Policy *shipped = sched::libraryPolicy(name))
          return std::make_pair(*shipped, std::move(*values));
        std::vector<std::string> names;
        for (const sched::Policy &p : sched::libraryPolicies())
          names.push_back(p.name);
        return fail(fmt::format("policy=@{}: the module has no pipe.policy "
                                "@{}, and the library has none of that name "
                                "({})",
                                name.str(), name.str(),
                                fmt::join(names, ", ")));
      }
      llvm::Expected<sched::Policy> parsed = policyFromOp(policyOp);
      if (!parsed)
        return fail(describePolicyMessage(llvm::toString(parsed.takeError())));
      return std::make_pair(std::move(*parsed), std::move(*values));
    }
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
        llvm::MemoryBuffer::getFile(policyFile.getValue());
    if (!file)
      return fail(fmt::format("cannot read policy file {}: {}",
                              policyFile.getValue(),
                              file.getError().message()));
    llvm::Expected<sched::Policy> parsed =
        sched::parsePolicy((*file)->getBuffer());
    if (!parsed)
      return fail(fmt::format("{}: {}", policyFile.getValue(),
                              llvm::toString(parsed.takeError())));
    return std::make_pair(std::move(*parsed), std::move(*values));
  }

  /// Schedules \p pipeline by the policy of policy-file= or policy=.
  /// Errors of a policy op are reported at it, with a note at the pipeline.
  LogicalResult scheduleByPolicy(ModuleOp module, SymbolTable &symbols,
                                 PipelineOp pipeline) {
    PolicyOp policyOp;
    auto loaded = loadPolicy(symbols, policyOp);
    if (!loaded)
      return pipeline.emitError() << llvm::toString(loaded.takeError());
    const auto &[policy, values] = *loaded;
    if (pipeline.isLayerPipeline())
      return pipeline.emitError()
             << "pipeline @" << pipeline.getSymName()
             << " holds pipe.layer ops: cut it into stages first with "
                "--pipe-partition";
    sched::Problem problem = problemFromPipeline(pipeline);
    llvm::Expected<sched::Schedule> schedule =
        sched::instantiatePolicy(policy, problem, values);
    if (!schedule) {
      std::string message = llvm::toString(schedule.takeError());
      if (!policyOp)
        return pipeline.emitError() << message;
      InFlightDiagnostic diag = policyOp.emitError()
                                << describePolicyMessage(message);
      diag.attachNote(pipeline.getLoc())
          << "applied to pipeline @" << pipeline.getSymName();
      return diag;
    }
    return insertPolicySchedule(module, symbols, pipeline, policy, values,
                                *schedule);
  }

  /// reduce= and bucket=: a fixed kind's reductions.
  sched::DataParallelOptions reduceOptions() const {
    if (reduce == "bucketed")
      return {sched::ReducePlacement::Bucketed, bucket};
    return {};
  }

  /// Records reduce= on \p op when its pipeline runs inside data
  /// parallelism.
  void placeReductions(PipelineOp pipeline, ScheduleOp op) const {
    if (pipeline.hasDataParallel())
      setDataParallelOptions(op, reduceOptions());
  }

  /// kind=auto inside data parallelism: the schedule, its reductions'
  /// placement and bucket size chosen together for the shortest step.
  LogicalResult scheduleDataParallel(ModuleOp module, SymbolTable &symbols,
                                     PipelineOp pipeline,
                                     const sched::Problem &problem,
                                     const sched::KindRequest &request) {
    if (request.objective != sched::Objective::Makespan)
      return pipeline.emitError()
             << "kind=auto with data_parallel(...) minimizes the step with "
                "its collectives; objective=span is not supported with it";
    llvm::Expected<sched::DataParallelPlan> plan = sched::planDataParallel(
        problem, *dataParallelFromPipeline(pipeline), request);
    if (!plan)
      return pipeline.emitError()
             << "cannot schedule pipeline @" << pipeline.getSymName()
             << " as auto inside data parallelism: "
             << llvm::toString(plan.takeError());
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(pipeline);
    ScheduleOp op = buildSchedule(builder, pipeline.getLoc(), pipeline,
                                  (pipeline.getSymName() + "_auto").str(),
                                  "auto", plan->plan);
    op->setAttr("auto_choice",
                builder.getStringAttr(plan->schedule + "; " + plan->placement));
    setDataParallelOptions(op, plan->options);
    op.setDpBoundAttr(builder.getF64FloatAttr(plan->bound));
    if (!plan->microbatchOrder.empty())
      op->setAttr(
          "microbatch_order",
          builder.getDenseI64ArrayAttr(SmallVector<int64_t>(
              plan->microbatchOrder.begin(), plan->microbatchOrder.end())));
    symbols.insert(op, Block::iterator(op));
    return success();
  }

  /// Inserts \p schedule, \p policy's at \p values, after \p pipeline.
  LogicalResult insertPolicySchedule(ModuleOp module, SymbolTable &symbols,
                                     PipelineOp pipeline,
                                     const sched::Policy &policy,
                                     const sched::PolicyParams &values,
                                     const sched::Schedule &schedule) {
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(pipeline);
    std::string name = (pipeline.getSymName() + "_" + policy.name).str();
    for (char &c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)))
        c = '_';
    ScheduleOp op = buildSchedule(builder, pipeline.getLoc(), pipeline, name,
                                  "policy", schedule);
    placeReductions(pipeline, op);
    op->setAttr(
        "auto_choice",
        builder.getStringAttr(sched::describePolicyChoice(policy, values)));
    symbols.insert(op, Block::iterator(op));
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    if (!policyFile.empty() && !policy.empty()) {
      module.emitError() << "pipe-schedule: give policy-file= or policy=, "
                            "not both";
      return signalPassFailure();
    }
    const bool byPolicy = !policyFile.empty() || !policy.empty();
    if (byPolicy && kind.hasValue() && kind != "auto" &&
        kind != "policy-search") {
      module.emitError() << "pipe-schedule: kind=" << kind
                         << " with a policy: leave kind= out to instantiate "
                            "the policy, or give kind=auto (the policy among "
                            "auto's candidates) or kind=policy-search (its "
                            "parameters searched)";
      return signalPassFailure();
    }
    if (kind == "policy-search" && !byPolicy) {
      module.emitError() << "pipe-schedule: kind=policy-search needs the "
                            "policy: policy=@NAME or policy-file=PATH";
      return signalPassFailure();
    }
    // The policies auto and policy-search take besides the library's.
    std::vector<sched::KindRequest::PolicyCandidate> candidates;
    if (byPolicy && kind.hasValue()) {
      PolicyOp policyOp;
      auto loaded = loadPolicy(symbols, policyOp);
      if (!loaded) {
        module.emitError() << llvm::toString(loaded.takeError());
        return signalPassFailure();
      }
      candidates.push_back({loaded->first, loaded->second});
    }
    if (kind == "auto")
      for (PolicyOp op : module.getOps<PolicyOp>()) {
        if (!candidates.empty() && op.getSymName() == candidates[0].policy.name)
          continue;
        llvm::Expected<sched::Policy> parsed = policyFromOp(op);
        if (!parsed) {
          op.emitError() << describePolicyMessage(
              llvm::toString(parsed.takeError()));
          return signalPassFailure();
        }
        candidates.push_back({std::move(*parsed), {}});
      }
    if (byPolicy && !kind.hasValue()) {
      for (PipelineOp pipeline :
           llvm::make_early_inc_range(module.getOps<PipelineOp>()))
        if (failed(scheduleByPolicy(module, symbols, pipeline)))
          return signalPassFailure();
      return;
    }
    for (PipelineOp pipeline :
         llvm::make_early_inc_range(module.getOps<PipelineOp>())) {
      if (kind != "auto" && kind != "exact" && kind != "ilp" &&
          kind != "policy-search") {
        llvm::Expected<sched::ScheduleKind> parsed =
            sched::parseScheduleKind(kind);
        if (!parsed) {
          pipeline.emitError() << llvm::toString(parsed.takeError());
          return signalPassFailure();
        }
      }
      if (pipeline.isLayerPipeline() && kind == "auto") {
        if (failed(searchLayers(module, symbols, pipeline)))
          return signalPassFailure();
        continue;
      }
      if (pipeline.isLayerPipeline()) {
        pipeline.emitError()
            << "pipeline @" << pipeline.getSymName()
            << " holds pipe.layer ops: cut it into stages first with "
               "--pipe-partition (e.g. --pipe-partition=\"stages=auto\" "
               "--pipe-schedule=...)";
        return signalPassFailure();
      }
      sched::Problem problem = problemFromPipeline(pipeline);
      int64_t actions = int64_t(problem.numStages()) * problem.microbatches * 3;
      if (actions > maxActions) {
        pipeline.emitError() << fmt::format(
            "pipeline @{} needs {} actions ({} stages x {} microbatches x 3), "
            "above max-actions={}; raise it with --pipe-schedule=\"... "
            "max-actions=N\" if the machine has the memory (about 200 bytes "
            "each)",
            problem.name, actions, problem.numStages(), problem.microbatches,
            int64_t(maxActions));
        return signalPassFailure();
      }
      sched::KindRequest request;
      request.kind = kind;
      request.chunks = chunks;
      request.folds = folds;
      if (!recompute.empty()) {
        request.recompute = sched::parseRecomputePolicy(recompute);
        if (!request.recompute) {
          pipeline.emitError() << "recompute=" << recompute
                               << " is not one of none, full, selective, auto";
          return signalPassFailure();
        }
      }
      request.memoryLimit = memoryLimit;
      request.timeLimit = timeLimit;
      request.objective = llvm::cantFail(sched::parseObjective(objective));
      request.policies = candidates;
      request.progress = [&](const sched::AutoProgress &p) {
        llvm::errs() << fmt::format(
            "pipe-schedule auto @{}: {} candidates in {:.1f} s, best {} "
            "{:.6g} ({}), lower bound {:.6g}\n",
            problem.name, p.candidates, p.seconds, objective.getValue(),
            p.bestMakespan, p.bestName, p.lowerBound);
      };
      if (kind == "auto" && pipeline.hasDataParallel()) {
        if (failed(scheduleDataParallel(module, symbols, pipeline, problem,
                                        request)))
          return signalPassFailure();
        continue;
      }
      llvm::Expected<sched::KindResult> result =
          sched::scheduleByName(problem, request);
      if (!result) {
        std::string message = llvm::toString(result.takeError());
        InFlightDiagnostic diag = pipeline.emitError()
                                  << "cannot schedule pipeline @"
                                  << pipeline.getSymName() << " as " << kind
                                  << ": " << message;
        if (std::optional<std::string> hint = hintFor(kind, message))
          diag.attachNote() << *hint;
        return signalPassFailure();
      }
      OpBuilder builder(module.getContext());
      builder.setInsertionPointAfter(pipeline);
      std::string name = (pipeline.getSymName() + "_" + kind).str();
      for (char &c : name)
        if (c == '-')
          c = '_';
      ScheduleOp op = buildSchedule(builder, pipeline.getLoc(), pipeline, name,
                                    kind, result->schedule);
      placeReductions(pipeline, op);
      if (!result->microbatchOrder.empty()) {
        SmallVector<int64_t> order(result->microbatchOrder.begin(),
                                   result->microbatchOrder.end());
        op->setAttr("microbatch_order", builder.getDenseI64ArrayAttr(order));
      }
      if (!result->choice.empty()) {
        op->setAttr("auto_choice", builder.getStringAttr(result->choice));
        // helix (auto's choice for attention stages) has no bound here.
        if (result->lowerBound > 0.0) {
          op->setAttr("lower_bound",
                      builder.getF64FloatAttr(result->lowerBound));
          op->setAttr("memory_aware_bound",
                      builder.getF64FloatAttr(result->memoryAwareBound));
        }
      }
      if (request.objective == sched::Objective::Span) {
        op->setAttr("objective", builder.getStringAttr("span"));
        if (result->spanBound > 0.0)
          op->setAttr("span_bound", builder.getF64FloatAttr(result->spanBound));
      }
      // Renames on a clash so that rescheduling keeps earlier schedules.
      symbols.insert(op, Block::iterator(op));
    }
  }

  /// kind=auto on a layer pipeline: partition x device order x kind
  /// (scheduler/search/LayerSearch.h); the pipeline becomes the chosen stage
  /// pipeline and gets the schedule.
  LogicalResult searchLayers(ModuleOp module, SymbolTable &symbols,
                             PipelineOp pipeline) {
    std::vector<sched::Layer> layers = layersFromPipeline(pipeline);
    sched::Problem ranks = problemFromPipeline(pipeline);
    sched::KindRequest request;
    request.kind = "auto";
    if (!recompute.empty())
      request.recompute = sched::parseRecomputePolicy(recompute);
    request.memoryLimit = memoryLimit;
    request.timeLimit = timeLimit;
    llvm::Expected<sched::LayerSearchResult> found =
        sched::searchLayerPipeline(ranks, layers, request);
    if (!found)
      return pipeline.emitError()
             << "cannot schedule layer pipeline @" << pipeline.getSymName()
             << " as auto: " << llvm::toString(found.takeError());
    replaceLayersWithStages(pipeline, layers, found->partition,
                            found->deviceOrder);
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(pipeline);
    ScheduleOp op = buildSchedule(builder, pipeline.getLoc(), pipeline,
                                  (pipeline.getSymName() + "_auto").str(),
                                  "auto", found->result.schedule);
    op->setAttr("auto_choice", builder.getStringAttr(found->choice));
    op->setAttr("candidates", builder.getI64IntegerAttr(found->candidates));
    symbols.insert(op, Block::iterator(op));
    return success();
  }
};
} // namespace
