// RUN: stagecraft-opt %S/Inputs/long-tail.mlir --pipe-schedule="kind=zb-h1" --pipe-simulate | FileCheck %s --check-prefix=GIVEN
// RUN: stagecraft-opt %S/Inputs/long-tail.mlir --pipe-schedule="kind=auto time-limit=1 memory-limit=14" --pipe-simulate -o %t.mlir
// RUN: FileCheck %s --check-prefix=AUTO < %t.mlir
// RUN: %python -c "import re,sys; t=open(sys.argv[1]).read(); o=[int(x) for x in re.search(r'microbatch_order = array<i64: ([0-9, ]+)>', t).group(1).split(',')]; s=float(re.search(r'makespan = ([0-9.e+]+)', t).group(1)); print('permutation' if sorted(o) == list(range(8)) else o, 'faster than zb-h1 as given' if s < 82.12 else s)" %t.mlir | FileCheck %s --check-prefix=CHECKED
// RUN: stagecraft-translate %t.mlir --pipe-to-summary | FileCheck %s --check-prefix=SUMMARY
// RUN: not stagecraft-opt %s --pipe-simulate 2>&1 | FileCheck %s --check-prefix=BAD

// Tests that auto on a pipeline with lengths(...) may run the microbatches
// in another order (here one 8192-token microbatch among 512-token ones):
// the schedule records the order it chose, microbatch_order (position k
// runs the pipeline's microbatch order[k]), everything that reads the
// schedule applies it, and it is faster than zb-h1 in the given order
// (82.12, peak 13.5), both within memory-limit=14.
// GIVEN: makespan = 8.212000e+01
// AUTO: auto_choice = "{{.*}}; microbatches {{.*}}"
// AUTO-SAME: microbatch_order = array<i64:
// CHECKED: permutation faster than zb-h1 as given
// The summary's busy time is the same whatever the order: every rank runs
// every microbatch once (3 x (5 x 0.5 + 1 + 2 + 8) = 40.5).
// SUMMARY: rank        busy
// SUMMARY-NEXT: 0 40.5

// A microbatch_order that is not a permutation is located.
// BAD: error: 'pipe.schedule' op microbatch_order must be a permutation of the 2 microbatches 0..1
pipe.pipeline @p ranks(1) microbatches(2) lengths(1, 2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
pipe.schedule @p_given for @p attributes {microbatch_order = array<i64: 0, 0>} {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.backward @s0 mb 0
    pipe.forward @s0 mb 1
    pipe.backward @s0 mb 1
  }
}
