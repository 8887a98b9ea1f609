//===- Translations.cpp - pipe IR translations ----------------------------===//
//
// Each exporting translation picks one verified `pipe.schedule` (the only one,
// or the one named by --schedule-name), reads it into the scheduler model and
// writes a format from the scheduler library. The CSV importer reads a spec
// file, places the CSV's actions into a new schedule op whose actions carry
// their CSV positions as locations, so verifier errors point into the CSV.
//
//===----------------------------------------------------------------------===//

#include "translate/Translations.h"

#include "dialect/PipeParse.h"

#include "dialect/PipeDialect.h"
#include "dialect/PipeModel.h"
#include "passes/ScheduleLookup.h"

#include "scheduler/formats/ChromeTrace.h"
#include "scheduler/formats/ProblemJson.h"
#include "scheduler/formats/PyTorchCsv.h"
#include "scheduler/formats/Report.h"
#include "scheduler/kinds/Kinds.h"
#include "translate/PlanCompiler.h"

#include <fmt/format.h>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace stagecraft::pipe;

namespace {
struct TranslateOptions {
  llvm::cl::opt<std::string> scheduleName{
      "schedule-name",
      llvm::cl::desc("pipe.schedule to export (default: the only one); name "
                     "of the imported schedule for --pipe-from-csv")};
  llvm::cl::opt<std::string> spec{
      "pipe-spec",
      llvm::cl::desc("--pipe-from-csv: file with the pipe.pipeline the CSV "
                     "schedules")};
  llvm::cl::opt<std::string> pipelineName{
      "pipeline-name",
      llvm::cl::desc("--pipe-from-csv: pipeline in --pipe-spec; "
                     "--pipe-to-problem: the pipeline to write (default: the "
                     "only one)")};
  llvm::cl::opt<int64_t> unitBytes{
      "unit-bytes", llvm::cl::init(4096),
      llvm::cl::desc(
          "--pipe-to-plan: bytes per memory unit of the spec (default "
          "4096)")};
  llvm::cl::opt<int64_t> messageBytes{
      "message-bytes", llvm::cl::init(64),
      llvm::cl::desc(
          "--pipe-to-plan: smallest activation/gradient buffer (for "
          "stagecraft-run --train, at least the model's message; default 64)")};
  llvm::cl::opt<int> fallbacks{
      "fallbacks", llvm::cl::init(0),
      llvm::cl::desc("--pipe-to-plan: also store verified plans of the same "
                     "pipeline for 1..K ranks fewer (the same kind where it "
                     "applies, else auto), which stagecraft-run --elastic "
                     "runs after a lost rank without compiling (default 0)")};
  llvm::cl::opt<int> timelineWidth{
      "timeline-width", llvm::cl::init(100),
      llvm::cl::desc(
          "--pipe-to-summary: columns of the ASCII timeline (default "
          "100; a note names the width that shows every "
          "microbatch number when they do not fit)")};
};
} // namespace

static TranslateOptions *options = nullptr;

/// Runs \p fn on the schedule selected by --schedule-name.
static LogicalResult withSelectedSchedule(
    Operation *op,
    llvm::function_ref<LogicalResult(ScheduleOp, const ScheduleModel &)> fn) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitError("expected a module");
  SmallVector<ScheduleOp> schedules;
  for (ScheduleOp s : module.getOps<ScheduleOp>())
    if (options->scheduleName.empty() ||
        s.getSymName() == options->scheduleName)
      schedules.push_back(s);
  if (schedules.empty())
    return module.emitError()
           << (options->scheduleName.empty()
                   ? std::string("no pipe.schedule in the input; run "
                                 "stagecraft-opt --pipe-schedule first")
                   : "no pipe.schedule named @" + options->scheduleName);
  if (schedules.size() > 1)
    return module.emitError() << schedules.size()
                              << " pipe.schedule ops in the input; choose one "
                                 "with --schedule-name";
  bool found = false;
  LogicalResult result =
      forEachSchedule(module, [&](ScheduleOp s, const ScheduleModel &model) {
        if (s != schedules.front())
          return success();
        found = true;
        return fn(s, model);
      });
  return success(succeeded(result) && found);
}

static LogicalResult toCsv(Operation *op, llvm::raw_ostream &os) {
  return withSelectedSchedule(op, [&](ScheduleOp s,
                                      const ScheduleModel &model) {
    // Inside data parallelism, a CSV with communication carries each
    // stage's REDUCE_GRAD (and, sharded, UNSHARD / RESHARD); torch adds its
    // own by rule to a compute-only one.
    std::optional<sched::TorchGradientCells> gradients;
    if (model.dataParallel && model.program)
      gradients = sched::TorchGradientCells{
          model.dataParallel->sharding != sched::DataParallel::Sharding::None};
    llvm::Expected<std::string> csv =
        model.program ? sched::formatPyTorchCsv(
                            *model.program, gradients ? &*gradients : nullptr)
                      : sched::formatPyTorchCsv(model.schedule);
    if (!csv)
      return emitScheduleError(s, model, csv.takeError(),
                               model.program ? SiteSpace::Instructions
                                             : SiteSpace::Actions);
    os << *csv;
    if (model.dataParallel && !model.program)
      s.emitRemark() << "the compute-only CSV leaves the gradient reductions "
                        "to torch's rule (REDUCE_GRAD after each stage's last "
                        "backward); run --pipe-insert-comm first to write "
                        "Stagecraft's REDUCE_GRAD cells";
    if (model.dataParallel &&
        model.dataParallelOptions.placement == sched::ReducePlacement::Bucketed)
      s.emitWarning() << "dp_placement is bucketed, which torch's CSV cannot "
                         "express: each REDUCE_GRAD reduces its stage whole "
                         "(DDP's own buckets still overlap a fused backward)";
    if (!model.problem.isChain())
      s.emitWarning() << "pipeline @" << model.problem.name
                      << " branches (inputs(...)): the CSV lists its stages "
                         "in topological order, but torch.distributed."
                         "pipelining passes one tensor from each stage to "
                         "the next, so torch cannot run this schedule";
    // The CSV has no cell for recomputation: say how torch runs it.
    if (model.schedule.recompute.any()) {
      llvm::Expected<std::vector<int>> stages =
          sched::torchCheckpointStages(model.problem, model.schedule);
      if (!stages) {
        s.emitWarning() << "the CSV cannot carry this schedule's "
                           "recomputation: "
                        << llvm::toString(stages.takeError());
      } else {
        std::string names;
        for (int st : *stages)
          names +=
              (names.empty() ? "@" : ", @") + model.problem.stages[st].name;
        s.emitRemark() << "every forward of " << names
                       << " recomputes: run those stages' modules under "
                          "torch.utils.checkpoint (stagecraft.torch.schedule "
                          "does)";
      }
    }
    return success();
  });
}

static LogicalResult toSummary(Operation *op, llvm::raw_ostream &os) {
  return withSelectedSchedule(op, [&](ScheduleOp s,
                                      const ScheduleModel &model) {
    FailureOr<sched::Timeline> timeline = simulateSchedule(s, model);
    if (failed(timeline))
      return failure();
    os << sched::formatSummary(model.problem, model.schedule, *timeline,
                               s.getSymName(), options->timelineWidth);
    FailureOr<std::optional<DataParallelStep>> step =
        simulateDataParallelOf(s, model, *timeline);
    if (failed(step))
      return failure();
    if (*step)
      os << sched::formatDataParallelSummary(*model.dataParallel,
                                             model.dataParallelOptions,
                                             (*step)->timeline, (*step)->bound);
    return success();
  });
}

static LogicalResult toChromeTrace(Operation *op, llvm::raw_ostream &os) {
  return withSelectedSchedule(
      op, [&](ScheduleOp s, const ScheduleModel &model) {
        FailureOr<sched::Timeline> timeline = simulateSchedule(s, model);
        if (failed(timeline))
          return failure();
        FailureOr<std::optional<DataParallelStep>> step =
            simulateDataParallelOf(s, model, *timeline);
        if (failed(step))
          return failure();
        sched::ChromeTraceWriter writer;
        writer.addTimeline("simulated " + s.getSymName().str(), model.problem,
                           *timeline, *step ? &(*step)->timeline : nullptr);
        os << writer.str();
        return success();
      });
}

/// Compiles \p s's pipeline for 1..\p count ranks fewer into \p plan's
/// fallbacks: the same kind where it applies, else auto. Stops, with a
/// warning naming why, at the first rank count nothing fits (fewer ranks
/// would not fit either).
static LogicalResult addFallbacks(ScheduleOp s, sched::Plan &plan, int count) {
  auto module = s->getParentOfType<ModuleOp>();
  const int ranks = plan.numRanks();
  // Kinds the scheduler regenerates; a written or imported schedule's
  // fallbacks come from auto.
  std::string kind = s.getKind().value_or("").str();
  if (llvm::Expected<sched::ScheduleKind> parsed =
          sched::parseScheduleKind(kind);
      !parsed) {
    llvm::consumeError(parsed.takeError());
    kind = "auto";
  }
  if (count > 0 && !plan.ranks.empty() && !plan.ranks[0].device.empty()) {
    s.emitWarning() << "--fallbacks=" << count
                    << ": not stored for a pipeline with devices(...): which "
                       "rank is lost decides the survivors' devices, so "
                       "stagecraft-run --elastic compiles for the survivors "
                       "it has";
    return success();
  }
  for (int k = 1; k <= count; ++k) {
    if (ranks - k < 1) {
      s.emitWarning() << "--fallbacks=" << count << ": stored the " << k - 1
                      << " for 1.." << ranks - 1
                      << " ranks; there is no plan for 0 ranks";
      return success();
    }
    std::string errors;
    auto attempt = [&](const std::string &as) -> llvm::Expected<sched::Plan> {
      OwningOpRef<ModuleOp> copy = module.clone();
      // Only the pipelines: the scheduler adds the new schedule.
      SmallVector<Operation *> schedules;
      for (ScheduleOp old : copy->getOps<ScheduleOp>())
        schedules.push_back(old);
      for (Operation *old : schedules)
        old->erase();
      CompileOptions compile;
      compile.kind = as;
      compile.ranks = ranks - k;
      compile.unitBytes = options->unitBytes;
      compile.minMessageBytes = options->messageBytes;
      // Diagnostics of a try become part of the answer, not output.
      ScopedDiagnosticHandler capture(s.getContext(), [&](Diagnostic &d) {
        if (d.getSeverity() == DiagnosticSeverity::Error)
          errors += (errors.empty() ? "" : "; ") + d.str();
        return success();
      });
      return compileModule(*copy, compile,
                           fmt::format("{} ranks as {}", ranks - k, as));
    };
    llvm::Expected<sched::Plan> fallback = attempt(kind);
    if (!fallback && kind != "auto") {
      llvm::consumeError(fallback.takeError());
      fallback = attempt("auto");
    }
    if (!fallback) {
      std::string why = llvm::toString(fallback.takeError());
      if (errors.empty())
        errors = why;
      s.emitWarning() << "--fallbacks=" << count << ": no plan fits "
                      << ranks - k << " ranks (" << errors
                      << "); the plan holds fallbacks for " << k - 1
                      << " rank counts";
      return success();
    }
    plan.fallbacks.push_back(std::move(*fallback));
  }
  return success();
}

static LogicalResult toPlan(Operation *op, llvm::raw_ostream &os) {
  return withSelectedSchedule(
      op, [&](ScheduleOp s, const ScheduleModel &model) -> LogicalResult {
        if (options->unitBytes < 1)
          return s.emitError() << "--unit-bytes must be at least 1";
        FailureOr<sched::Plan> plan = planFromSchedule(
            s, model, options->unitBytes, nullptr, options->messageBytes);
        if (failed(plan))
          return failure();
        if (options->fallbacks < 0)
          return s.emitError()
                 << "--fallbacks=" << options->fallbacks.getValue()
                 << " must be at least 0";
        if (failed(addFallbacks(s, *plan, options->fallbacks)))
          return failure();
        os << sched::writePlan(*plan);
        return success();
      });
}

static bool printOpOnDiagnostic = false;

/// The pipeline of \p module that --pipeline-name names, or the only one;
/// null after an error (several, or none) that ends with \p where.
static PipelineOp selectPipeline(ModuleOp module, const std::string &where) {
  PipelineOp pipeline;
  for (PipelineOp p : module.getOps<PipelineOp>()) {
    if (!options->pipelineName.empty() &&
        p.getSymName() != options->pipelineName)
      continue;
    if (pipeline) {
      emitError(p.getLoc()) << "several pipelines" << where
                            << "; choose one with --pipeline-name";
      return nullptr;
    }
    pipeline = p;
  }
  if (!pipeline)
    emitError(module.getLoc())
        << "no pipe.pipeline"
        << (options->pipelineName.empty() ? std::string()
                                          : " named @" + options->pipelineName)
        << where;
  return pipeline;
}

static OwningOpRef<Operation *> fromCsv(llvm::SourceMgr &sourceMgr,
                                        MLIRContext *context) {
  context->loadDialect<PipeDialect>();
  context->printOpOnDiagnostic(printOpOnDiagnostic);
  const llvm::MemoryBuffer *csv =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  Location csvLoc =
      FileLineColLoc::get(context, csv->getBufferIdentifier(), 1, 1);
  if (options->spec.empty()) {
    emitError(csvLoc) << "--pipe-from-csv needs --pipe-spec=FILE with the "
                         "pipe.pipeline the CSV schedules";
    return nullptr;
  }
  llvm::SourceMgr specSource;
  OwningOpRef<ModuleOp> module =
      parsePipeFile(options->spec, specSource, context);
  if (!module)
    return nullptr;
  PipelineOp pipeline = selectPipeline(*module, " in " + options->spec);
  if (!pipeline)
    return nullptr;
  sched::Problem problem = problemFromPipeline(pipeline);
  llvm::Expected<sched::ImportedSchedule> imported =
      sched::parsePyTorchCsv(csv->getBuffer(), problem);
  if (!imported) {
    llvm::handleAllErrors(
        imported.takeError(),
        [&](const sched::CsvError &e) {
          emitError(FileLineColLoc::get(context, csv->getBufferIdentifier(),
                                        e.position.line, e.position.column))
              << e.message;
        },
        [&](const llvm::ErrorInfoBase &e) {
          emitError(csvLoc) << e.message();
        });
    return nullptr;
  }
  OpBuilder builder(context);
  builder.setInsertionPointAfter(pipeline);
  std::string name = options->scheduleName.empty()
                         ? pipeline.getSymName().str() + "_csv"
                         : options->scheduleName.getValue();
  auto locOf = [&](const std::vector<std::vector<sched::CsvPosition>> &at) {
    return [&, at](int r, int i) -> Location {
      const sched::CsvPosition &pos = at[r][i];
      return FileLineColLoc::get(context, csv->getBufferIdentifier(), pos.line,
                                 pos.column);
    };
  };
  ScheduleOp op =
      imported->program
          ? buildProgram(builder, csvLoc, pipeline, name, "csv",
                         *imported->program,
                         locOf(imported->instructionPositions))
          : buildSchedule(builder, csvLoc, pipeline, name, "csv",
                          imported->schedule, locOf(imported->positions));
  SymbolTable(*module).insert(op, Block::iterator(op));
  return OwningOpRef<Operation *>(module.release());
}

/// The pipeline of a spec as problem JSON (scheduler/formats/ProblemJson.h),
/// for code without MLIR such as the Python wheel's `sc.load`.
static LogicalResult toProblem(Operation *op, llvm::raw_ostream &os) {
  PipelineOp pipeline = selectPipeline(cast<ModuleOp>(op), "");
  if (!pipeline)
    return failure();
  sched::Problem problem = problemFromPipeline(pipeline);
  if (llvm::Error invalid = sched::validateProblem(problem)) {
    if (problem.stages.empty())
      pipeline.emitError()
          << "pipeline @" << problem.name
          << " has no stages to write; a spec of pipe.layer ops is cut into "
             "stages first: stagecraft-opt --pipe-partition";
    else
      pipeline.emitError() << llvm::toString(std::move(invalid));
    llvm::consumeError(std::move(invalid));
    return failure();
  }
  std::optional<sched::DataParallel> dp = dataParallelFromPipeline(pipeline);
  sched::writeProblemJson(os, problem, dp ? &*dp : nullptr);
  os << "\n";
  return success();
}

void stagecraft::pipe::setPrintOpOnDiagnostic(bool print) {
  printOpOnDiagnostic = print;
}

/// A translation from pipe IR: parsed through `parsePipeSource` (nesting
/// checked first), then handed to \p fn.
static TranslateFunction fromPipe(TranslateFromMLIRFunction fn) {
  return [fn](const std::shared_ptr<llvm::SourceMgr> &sourceMgr,
              llvm::raw_ostream &os, MLIRContext *context) -> LogicalResult {
    context->loadDialect<PipeDialect>();
    context->printOpOnDiagnostic(printOpOnDiagnostic);
    OwningOpRef<ModuleOp> module = parsePipeSource(*sourceMgr, context);
    if (!module)
      return failure();
    return fn(module.get(), os);
  };
}

void stagecraft::pipe::registerPipeTranslations() {
  static TranslateOptions opts;
  options = &opts;
  static TranslateRegistration csvOut(
      "pipe-to-csv", "write a schedule as torch.distributed.pipelining CSV",
      fromPipe(toCsv));
  static TranslateRegistration summary(
      "pipe-to-summary",
      "simulate a schedule and print its figures and an ASCII timeline",
      fromPipe(toSummary));
  static TranslateRegistration trace(
      "pipe-to-chrome-trace",
      "simulate a schedule and write its timeline as Chrome trace JSON "
      "(Perfetto); 1 time unit = 1 ms",
      fromPipe(toChromeTrace));
  static TranslateRegistration plan(
      "pipe-to-plan",
      "write the versioned runtime plan of a schedule (communication, buffer "
      "slots) for stagecraft-run",
      fromPipe(toPlan));
  static TranslateRegistration problem(
      "pipe-to-problem",
      "write a spec's pipeline as problem JSON (every field of the "
      "scheduler's problem; Python's sc.load reads it)",
      fromPipe(toProblem));
  static TranslateToMLIRRegistration csvIn(
      "pipe-from-csv",
      "read a torch.distributed.pipelining CSV against --pipe-spec into a "
      "pipe.schedule",
      fromCsv);
}
