//===- stagecraft-run.cpp - Runs a pipeline plan --------------------------===//
//
// `stagecraft-run spec.mlir --schedule=KIND` compiles and runs in one go;
// `stagecraft-run plan.json` runs a plan from `stagecraft-translate
// --pipe-to-plan`. `--backend=local` (default) runs every rank as a thread;
// `mpirun -np N stagecraft-run --backend=mpi ...` runs one rank per process;
// `--backend=cuda` runs every rank on the CUDA devices of this process.
//
// The run itself is the runtime's (runtime/Driver.h); this tool adds the
// command line and the spec compiler (translate/PlanCompiler.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/Driver.h"
#include "runtime/Executor.h"
#include "tools/stagecraft-run/RunOptions.h"
#include "translate/PlanCompiler.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <thread>

#ifdef STAGECRAFT_HAVE_MPI
#include <mpi.h>
#endif

using namespace llvm;
namespace runtime = stagecraft::runtime;

int main(int argc, char **argv) {
  stagecraft::RunCommandLine line = stagecraft::parseRunCommandLine(argc, argv);
  const runtime::DriverOptions &o = line.run;
  // Specs compile through translate's PlanCompiler; the runtime holds none.
  runtime::PlanSource source;
  source.compile = [&](const runtime::PlanRequest &request) {
    stagecraft::pipe::CompileOptions options = line.compile;
    options.kind = request.kind;
    options.chunks = request.chunks;
    options.ranks = request.ranks;
    options.survivors = request.survivors;
    options.speedFactors = request.speedFactors;
    options.minMessageBytes = request.minMessageBytes;
    options.quiet = request.quiet;
    return stagecraft::pipe::compileSpecFile(o.input, options);
  };
  source.profile = [&](const stagecraft::kernels::ModelConfig &model, int steps,
                       StringRef output,
                       const stagecraft::kernels::StageFactory &where) {
    return stagecraft::pipe::profileSpecFile(o.input, model, steps, output,
                                             where);
  };
  source.calibrate = [&](const runtime::Calibration &c, StringRef output) {
    // The spec gets the fitted parts with the fit's stretch.
    const runtime::Calibration fit = stagecraft::pipe::sched::stretched(c);
    stagecraft::pipe::MeasuredCosts costs;
    costs.forward = fit.forward;
    costs.backwardInput = fit.backwardInput;
    costs.backwardWeight = fit.backwardWeight;
    costs.backward = fit.backward;
    costs.latency = fit.latency;
    return stagecraft::pipe::writeSpecWithCosts(
        o.input, costs,
        "// Costs calibrated by stagecraft-run --calibrate from a measured "
        "run, in milliseconds.",
        output);
  };
  if (line.elastic) {
    std::string self = sys::fs::getMainExecutable(
        argv[0], reinterpret_cast<void *>(&runtime::superviseElastic));
    return runtime::superviseElastic(
        o, source, self, std::vector<std::string>(argv + 1, argv + argc));
  }
  if (o.backend != "local" && o.backend != "mpi" && o.backend != "cuda") {
    errs() << "stagecraft-run: error: unknown --backend=" << o.backend
           << "; expected local, mpi or cuda\n";
    return 1;
  }
  if (o.backend == "cuda" && runtime::launchedByMpi()) {
#if !defined(STAGECRAFT_HAVE_MPI) || !defined(STAGECRAFT_HAVE_NCCL)
    errs() << "stagecraft-run: error: --backend=cuda under mpirun needs MPI "
              "and NCCL, and this build lacks one; run without mpirun (one "
              "thread per rank on the visible GPUs)\n";
    return 1;
#endif
  } else if (o.backend == "local" || o.backend == "cuda") {
    return runtime::runDriver(o, source, 0);
  }
#ifdef STAGECRAFT_HAVE_MPI
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = runtime::runDriver(o, source, rank);
  if (rc != 0 && rc != runtime::kExitStraggler) {
    errs().flush();
    // Let other failing ranks print their reports before the job ends.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    MPI_Abort(MPI_COMM_WORLD, rc);
  }
  MPI_Finalize();
  return rc;
#else
  errs() << "stagecraft-run: error: this build has no MPI (install "
            "libopenmpi-dev and reconfigure)\n";
  return 1;
#endif
}
