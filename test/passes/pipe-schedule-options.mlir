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
// RUN: %python -c "print('pipe.pipeline @huge ranks(2) microbatches(100000000) {'); print('  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)'); print('  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)'); print('}')" > %t.mbs.mlir
// RUN: not stagecraft-opt %t.mbs.mlir --pipe-schedule 2>&1 | FileCheck %s --check-prefix=MANYMBS
// RUN: %python -c "print('pipe.pipeline @wide ranks(1024) microbatches(65536) {'); [print('  pipe.stage @s%d cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)' % i) for i in range(1024)]; print('}')" > %t.wide.mlir
// RUN: not stagecraft-opt %t.wide.mlir --pipe-schedule="kind=1f1b" 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: not stagecraft-opt %s --pipe-schedule="max-actions=0" 2>&1 | FileCheck %s --check-prefix=MAXACTIONS
// RUN: not stagecraft-opt %s --pipe-schedule="max-actions=12" 2>&1 | FileCheck %s --check-prefix=SMALL

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
// Tests that pipelines too large to schedule are refused up front, naming the
// size and the limit (10^8 microbatches used to run out of memory after 5 s,
// 1024 ranks x 65536 microbatches after reaching 18 GB).
// MANYMBS: error: pipeline @huge needs 600000000 actions (2 stages x 100000000 microbatches x 3), above max-actions=16777216; raise it with --pipe-schedule="... max-actions=N" if the machine has the memory (about 200 bytes each)
// WIDE: error: pipeline @wide needs 201326592 actions (1024 stages x 65536 microbatches x 3), above max-actions=16777216
// MAXACTIONS: error: pipe-schedule: max-actions=0 must be at least 1
// SMALL: error: pipeline @p needs 48 actions (4 stages x 4 microbatches x 3), above max-actions=12

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
