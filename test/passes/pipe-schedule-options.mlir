// RUN: not stagecraft-opt %s --pipe-schedule="kind=interleaved-1f1b chunks=99999999999" 2>&1 | FileCheck %s --check-prefix=BIGCHUNKS
// RUN: not stagecraft-opt %s --pipe-schedule="kind=interleaved-1f1b chunks=2147483647" 2>&1 | FileCheck %s --check-prefix=MAXCHUNKS
// RUN: not stagecraft-opt %s --pipe-schedule="kind=auto memory-limit=-5" 2>&1 | FileCheck %s --check-prefix=NEGMEM
// RUN: not stagecraft-opt %s --pipe-schedule="kind=auto memory-limit=nan" 2>&1 | FileCheck %s --check-prefix=NANMEM
// RUN: not stagecraft-opt %s --pipe-schedule="kind=auto time-limit=nan" 2>&1 | FileCheck %s --check-prefix=NANTIME
// RUN: not stagecraft-opt %s --pipe-schedule="kind=auto time-limit=-1" 2>&1 | FileCheck %s --check-prefix=NEGTIME
// RUN: not stagecraft-opt %s --pipe-schedule="kind=helix folds=0" 2>&1 | FileCheck %s --check-prefix=FOLDS
// RUN: not stagecraft-opt %s --pipe-schedule="kind=helix folds=99999999999" 2>&1 | FileCheck %s --check-prefix=BIGFOLDS
// RUN: stagecraft-opt %examples/helix.mlir --pipe-schedule="kind=helix folds=2147483647" --pipe-simulate | FileCheck %s --check-prefix=HELIXFOLDS
// RUN: stagecraft-opt %examples/helix.mlir --pipe-schedule="kind=helix folds=8" --pipe-simulate | FileCheck %s --check-prefix=HELIXFOLDS

// Tests that every pass option out of range is refused with a message that
// names it, before anything runs: an integer beyond int used to leave an
// empty error, 2^31-1 chunks overflowed the stage count, and negative or
// NaN limits were taken as "no limit".
// BIGCHUNKS: error: pipe-schedule: chunks=99999999999 is not an integer in [0, 2147483647]
// MAXCHUNKS: error: cannot schedule pipeline @p as interleaved-1f1b: interleaved placement with 2147483647 chunks on 2 ranks needs 4294967294 stages, pipeline @p has 4
// NEGMEM: error: pipe-schedule: memory-limit=-5 must be a finite number >= 0
// NANMEM: error: pipe-schedule: memory-limit=nan must be a finite number >= 0
// NANTIME: error: pipe-schedule: time-limit=nan must be a finite number of seconds > 0
// NEGTIME: error: pipe-schedule: time-limit=-1 must be a finite number of seconds > 0
// FOLDS: error: pipe-schedule: folds=0 must be at least 1
// Tests that 2^31-1 folds (it used to overflow p x folds and run out of
// memory) is one group of all microbatches, as 8 folds are on 4 ranks x 8.
// HELIXFOLDS: makespan = 1.309500e+02 : f64
// BIGFOLDS: error: pipe-schedule: folds=99999999999 is not an integer in [0, 2147483647]
pipe.pipeline @p ranks(2) microbatches(4) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
