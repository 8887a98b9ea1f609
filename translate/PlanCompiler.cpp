//===- PlanCompiler.cpp - From pipe IR to a runtime plan ------------------===//
//
// See PlanCompiler.h.
//
//===----------------------------------------------------------------------===//

#include "translate/PlanCompiler.h"

#include "dialect/PipeParse.h"

#include "dialect/PipeDialect.h"
#include "passes/Passes.h"
#include "passes/ScheduleLookup.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/lower/Program.h"
#include "scheduler/model/CostFit.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <tuple>

using namespace mlir;
using namespace stagecraft::pipe;

llvm::Expected<sched::Plan>
stagecraft::pipe::compileSpecFile(llvm::StringRef path,
                                  const CompileOptions &options) {
  MLIRContext context;
  context.loadDialect<PipeDialect>();
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string errors;
  std::optional<ScopedDiagnosticHandler> collect;
  if (options.quiet)
    collect.emplace(&context, [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error)
        errors += (errors.empty() ? "" : "; ") + d.str();
      return success();
    });
  OwningOpRef<ModuleOp> module = parsePipeFile(path, sourceMgr, &context);
  llvm::Expected<sched::Plan> plan =
      module ? compileModule(*module, options, path)
             : llvm::Expected<sched::Plan>(llvm::createStringError(
                   llvm::inconvertibleErrorCode(),
                   path.str() + ": cannot parse the spec"));
  if (plan || errors.empty())
    return plan;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 llvm::toString(plan.takeError()) + ": " +
                                     errors);
}

/// Multiplies rank r's device speed by \p factors[r] in every pipeline of
/// \p module: a rank whose factor is not 1 gets a device of its own (its
/// old device's memory, the speed scaled); a pipeline without devices(...)
/// gets them. Errors are emitted at the pipeline.
static LogicalResult applySpeedFactors(ModuleOp module,
                                       llvm::ArrayRef<double> factors) {
  for (PipelineOp pipeline : module.getOps<PipelineOp>()) {
    const int64_t ranks = pipeline.getRanks();
    if (static_cast<int64_t>(factors.size()) != ranks) {
      pipeline.emitError() << "--speed-factors gives " << factors.size()
                           << " factors; pipeline @" << pipeline.getSymName()
                           << " runs on " << ranks << " ranks";
      return failure();
    }
    for (double f : factors)
      if (!std::isfinite(f) || f <= 0.0 || f > 1e6) {
        pipeline.emitError() << "--speed-factors: " << fmt::format("{}", f)
                             << " is not a speed factor (finite, above 0)";
        return failure();
      }
    if (llvm::all_of(factors, [](double f) { return f == 1.0; }))
      continue;
    ArrayAttr devices = pipeline.getDevicesAttr();
    Block &body = pipeline.getBody().front();
    OpBuilder b(&body, body.begin());
    mlir::SymbolTable symbols(pipeline);
    // A fresh device: speed and memory, under a name not yet taken.
    auto addDevice = [&](llvm::StringRef base, double speed,
                         FloatAttr memory) -> Attribute {
      std::string name = base.str();
      for (int k = 1; symbols.lookup(name); ++k)
        name = fmt::format("{}_{}", base.str(), k);
      auto op = b.create<DeviceOp>(pipeline.getLoc(), b.getStringAttr(name),
                                   b.getF64FloatAttr(speed), memory);
      symbols.insert(op);
      return FlatSymbolRefAttr::get(op.getSymNameAttr());
    };
    Attribute plain;
    SmallVector<Attribute> kept;
    for (int64_t r = 0; r < ranks; ++r) {
      double speed = 1.0;
      FloatAttr memory;
      std::string base = "device";
      if (devices) {
        auto ref = cast<FlatSymbolRefAttr>(devices[r]);
        auto device = cast<DeviceOp>(
            mlir::SymbolTable::lookupSymbolIn(pipeline, ref.getAttr()));
        speed = device.getSpeed().convertToDouble();
        memory = device.getMemoryAttr();
        base = device.getSymName().str();
        if (factors[r] == 1.0) {
          kept.push_back(ref);
          continue;
        }
      } else if (factors[r] == 1.0) {
        if (!plain)
          plain = addDevice("device", 1.0, FloatAttr());
        kept.push_back(plain);
        continue;
      }
      kept.push_back(addDevice(fmt::format("{}_rank{}_measured", base, r),
                               speed * factors[r], memory));
    }
    pipeline.setDevicesAttr(ArrayAttr::get(module.getContext(), kept));
  }
  return success();
}

llvm::Expected<sched::Plan>
stagecraft::pipe::compileModule(ModuleOp module, const CompileOptions &options,
                                llvm::StringRef what) {
  auto fail = [&](const std::string &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   what.str() + ": " + why);
  };
  MLIRContext *context = module.getContext();
  if (options.ranks > 0) {
    for (PipelineOp pipeline : module.getOps<PipelineOp>()) {
      for (StageOp stage : pipeline.getStages())
        if (stage.getRankAttr())
          return fail(fmt::format("stage @{} is pinned to a rank; re-planning "
                                  "on {} ranks needs a spec without pins",
                                  stage.getSymName().str(), options.ranks));
      if (ArrayAttr devices = pipeline.getDevicesAttr()) {
        // The survivors keep their devices.
        if (static_cast<int>(options.survivors.size()) != options.ranks)
          return fail(fmt::format(
              "pipeline @{} has devices(...): re-planning it on {} ranks "
              "needs the surviving ranks (--survivors=R,R,...; {} given)",
              pipeline.getSymName().str(), options.ranks,
              options.survivors.size()));
        SmallVector<Attribute> kept;
        for (int r : options.survivors) {
          if (r < 0 || r >= static_cast<int>(devices.size()))
            return fail(fmt::format("--survivors names rank {}; pipeline @{} "
                                    "has ranks 0..{}",
                                    r, pipeline.getSymName().str(),
                                    devices.size() - 1));
          kept.push_back(devices[r]);
        }
        pipeline.setDevicesAttr(ArrayAttr::get(context, kept));
      }
      pipeline.setRanksAttr(
          IntegerAttr::get(IntegerType::get(context, 64), options.ranks));
    }
    if (failed(mlir::verify(module)))
      return fail(fmt::format("does not verify on {} ranks", options.ranks));
  }
  if (!options.speedFactors.empty()) {
    if (failed(applySpeedFactors(module, options.speedFactors)))
      return fail("cannot apply --speed-factors");
    if (failed(mlir::verify(module)))
      return fail("does not verify with --speed-factors");
  }
  if (!options.kind.empty()) {
    PassManager pm(context);
    // A layer pipeline is cut into stages first (one per rank).
    // (auto searches the cut together with the kind.)
    for (PipelineOp pipeline : module.getOps<PipelineOp>())
      if (pipeline.isLayerPipeline() && options.kind != "auto") {
        PipePartitionPassOptions partition;
        if (!options.partitionStages.empty())
          partition.stages = options.partitionStages;
        // Balanced for where the kind puts the stages.
        if (llvm::Expected<sched::ScheduleKind> kind =
                sched::parseScheduleKind(options.kind)) {
          if (sched::stageShape(*kind) == sched::StageShape::Loop)
            partition.placement = "loop";
          else if (sched::stageShape(*kind) == sched::StageShape::V)
            partition.placement = "v";
        } else {
          llvm::consumeError(kind.takeError());
        }
        pm.addPass(createPipePartitionPass(partition));
        break;
      }
    PipeSchedulePassOptions pass;
    pass.kind = options.kind;
    pass.chunks = options.chunks;
    pass.memoryLimit = options.memoryLimit;
    pass.recompute = options.recompute;
    pass.objective = options.objective;
    pass.timeLimit = options.timeLimit;
    pm.addPass(createPipeSchedulePass(pass));
    if (failed(pm.run(module)))
      return fail("cannot schedule it as " + options.kind);
  }
  std::optional<sched::Plan> plan;
  int found = 0;
  LogicalResult result = forEachSchedule(
      module, [&](ScheduleOp op, const ScheduleModel &model) -> LogicalResult {
        // A freshly scheduled spec: the schedule just added for its kind.
        bool wanted = options.scheduleName.empty()
                          ? (options.kind.empty() ||
                             op.getKind() == llvm::StringRef(options.kind))
                          : op.getSymName() == options.scheduleName;
        if (!wanted)
          return success();
        if (++found > 1)
          return op.emitError()
                 << "several pipe.schedule ops match; choose one "
                    "with --schedule-name";
        FailureOr<sched::Plan> p = planFromSchedule(
            op, model, options.unitBytes, nullptr, options.minMessageBytes);
        if (failed(p))
          return failure();
        plan = std::move(*p);
        return success();
      });
  if (failed(result))
    return fail("cannot build a plan");
  if (!plan)
    return fail(options.kind.empty()
                    ? "holds no pipe.schedule; pass --schedule=KIND"
                    : "no schedule was produced");
  return std::move(*plan);
}

namespace {
/// A spec parsed to rewrite its costs: the context, the diagnostics (to
/// stderr) and the module, together.
struct ParsedSpec {
  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<SourceMgrDiagnosticHandler> handler;
  OwningOpRef<ModuleOp> module;
  explicit ParsedSpec(llvm::StringRef path) {
    context.loadDialect<PipeDialect>();
    context.printOpOnDiagnostic(false);
    handler = std::make_unique<SourceMgrDiagnosticHandler>(sourceMgr, &context);
    module = parsePipeFile(path, sourceMgr, &context);
  }
};
} // namespace

/// Sets \p stage's costs to these milliseconds, to four significant digits.
static void setStageCosts(StageOp stage, double f, double i, double w) {
  Builder builder(stage.getContext());
  auto round = [](double v) {
    return v > 0 ? std::stod(fmt::format("{:.4g}", v)) : 0.0;
  };
  stage.setForwardAttr(builder.getF64FloatAttr(round(f)));
  stage.setBackwardInputAttr(builder.getF64FloatAttr(round(i)));
  stage.setBackwardWeightAttr(builder.getF64FloatAttr(round(w)));
}

/// Prints \p module to \p output after the comment line \p header.
static llvm::Error
printSpec(ModuleOp module, llvm::StringRef output, llvm::StringRef header,
          llvm::function_ref<llvm::Error(const std::string &)> fail) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(output, &error);
  if (!out)
    return fail(error);
  out->os() << header << "\n";
  module.print(out->os());
  out->os() << "\n";
  out->keep();
  return llvm::Error::success();
}

llvm::Error stagecraft::pipe::profileSpecFile(
    llvm::StringRef path, const kernels::ModelConfig &config, int steps,
    llvm::StringRef output, const kernels::StageFactory &where) {
  auto fail = [&](const std::string &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path.str() + ": " + what);
  };
  if (llvm::Error err = config.validate())
    return err;
  ParsedSpec spec(path);
  if (!spec.module)
    return fail("cannot parse the spec");
  ModuleOp module = *spec.module;
  for (PipelineOp pipeline : module.getOps<PipelineOp>()) {
    std::vector<StageOp> ops(pipeline.getStages().begin(),
                             pipeline.getStages().end());
    kernels::ModelConfig c = config;
    c.microbatches = static_cast<int>(pipeline.getMicrobatches());
    std::vector<std::unique_ptr<kernels::LayerStage>> stages;
    int first = 0;
    for (size_t s = 0; s < ops.size(); ++s) {
      IntegerAttr layers = ops[s].getLayersAttr();
      if (!layers)
        return fail(fmt::format("stage @{} has no layers(N); profiling needs "
                                "the layer count of every stage",
                                ops[s].getSymName().str()));
      llvm::Expected<std::unique_ptr<kernels::LayerStage>> stage =
          where.make(c, static_cast<int>(s), static_cast<int>(ops.size()),
                     first, static_cast<int>(layers.getInt()));
      if (!stage)
        return stage.takeError();
      stages.push_back(std::move(*stage));
      first += static_cast<int>(layers.getInt());
    }
    const size_t n = stages.size();
    std::vector<double> f(n, 0), i(n, 0), w(n, 0);
    kernels::MessageBuffer ma = allocateMessage(where, c.messageBytes()),
                           mb = allocateMessage(where, c.messageBytes());
    if (!ma || !mb)
      return fail("cannot allocate message buffers on " + where.where);
    float *a = ma.get(), *b = mb.get();
    using Clock = std::chrono::steady_clock;
    // Device stages queue their work: each timing waits for it.
    auto ms = [&](Clock::time_point t0) {
      where.synchronize();
      return std::chrono::duration<double, std::milli>(Clock::now() - t0)
          .count();
    };
    for (int step = 0; step <= steps; ++step) {
      bool timed = step > 0; // the first step warms caches up
      for (auto &st : stages) {
        st->setStep(step);
        st->zeroGrad();
      }
      where.synchronize();
      for (int mb = 0; mb < c.microbatches; ++mb) {
        for (size_t s = 0; s < n; ++s) {
          auto t0 = Clock::now();
          stages[s]->forward(mb, s ? a : nullptr, b);
          if (timed)
            f[s] += ms(t0);
          std::swap(a, b);
        }
        for (size_t s = n; s-- > 0;) {
          auto t0 = Clock::now();
          stages[s]->backwardInput(mb, s + 1 < n ? a : nullptr, b);
          if (timed)
            i[s] += ms(t0);
          t0 = Clock::now();
          stages[s]->backwardWeight(mb);
          if (timed)
            w[s] += ms(t0);
          std::swap(a, b);
        }
      }
    }
    for (auto &st : stages)
      if (llvm::Error err = st->status())
        return err;
    double count = static_cast<double>(steps) * c.microbatches;
    for (size_t s = 0; s < n; ++s)
      setStageCosts(ops[s], f[s] / count, i[s] / count, w[s] / count);
  }
  return printSpec(module, output,
                   "// Costs measured by stagecraft-run --profile in "
                   "milliseconds.",
                   fail);
}

llvm::Error stagecraft::pipe::writeSpecWithCosts(llvm::StringRef path,
                                                 const MeasuredCosts &costs,
                                                 llvm::StringRef header,
                                                 llvm::StringRef output) {
  auto fail = [&](const std::string &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path.str() + ": " + what);
  };
  ParsedSpec spec(path);
  if (!spec.module)
    return fail("cannot parse the spec");
  ModuleOp module = *spec.module;
  auto pipelines = module.getOps<PipelineOp>();
  if (std::distance(pipelines.begin(), pipelines.end()) != 1)
    return fail("the measured costs are for one pipeline; the spec holds "
                "another number of them");
  PipelineOp pipeline = *pipelines.begin();
  std::vector<StageOp> ops(pipeline.getStages().begin(),
                           pipeline.getStages().end());
  if (ops.size() != costs.forward.size())
    return fail(fmt::format("pipeline @{} has {} stages; {} were measured",
                            pipeline.getSymName().str(), ops.size(),
                            costs.forward.size()));
  for (size_t s = 0; s < ops.size(); ++s) {
    double in = costs.backwardInput[s], weight = costs.backwardWeight[s];
    if (in <= 0.0 && weight <= 0.0 && costs.backward[s] > 0.0)
      std::tie(in, weight) = sched::splitBackward(
          costs.backward[s], ops[s].getBackwardInput().convertToDouble(),
          ops[s].getBackwardWeight().convertToDouble());
    setStageCosts(ops[s], costs.forward[s], in, weight);
  }
  if (costs.latency) {
    Builder builder(&spec.context);
    auto latency = builder.getF64FloatAttr(
        std::stod(fmt::format("{:.4g}", *costs.latency)));
    pipeline.setLatencyAttr(latency);
    // One latency was measured: the links' own, where given, take it.
    if (pipeline.getIntraLatencyAttr())
      pipeline.setIntraLatencyAttr(latency);
    if (pipeline.getInterLatencyAttr())
      pipeline.setInterLatencyAttr(latency);
  }
  return printSpec(module, output, header, fail);
}
