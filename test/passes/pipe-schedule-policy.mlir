// RUN: stagecraft-opt %s --pipe-schedule="policy-file=%S/../../examples/policies/1f1b.policy" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="policy-file=%S/../../examples/policies/zb-h1-rules.policy params=offset:2" --pipe-verify-schedule | FileCheck %s --check-prefix=PARAM
// RUN: not stagecraft-opt %s --pipe-schedule="policy-file=%S/Inputs/policies/broken.policy" 2>&1 | FileCheck %s --check-prefix=BROKEN
// RUN: not stagecraft-opt %s --pipe-schedule="policy-file=%S/Inputs/policies/div.policy" 2>&1 | FileCheck %s --check-prefix=DIV
// RUN: not stagecraft-opt %s --pipe-schedule="policy-file=%S/Inputs/policies/missing.policy" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not stagecraft-opt %s --pipe-schedule="policy-file=%S/../../examples/policies/zb-h1-rules.policy params=offset:7" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not stagecraft-opt %s --pipe-schedule="policy-file=%S/../../examples/policies/interleaved-1f1b.policy" 2>&1 | FileCheck %s --check-prefix=OUTSIDE

// Tests scheduling by a policy file: 1F1B written as phases gives 1F1B's
// order (the unit tests compare it with the kind over a grid); a
// parameter set from the command line is named in auto_choice;
// a broken file, a division by zero, a missing file, a parameter out of
// its range and a pipeline outside the policy's requires each fail at the
// pipeline with the line, the point or the reason.
// CHECK-LABEL: pipe.schedule @p_1f1b for @p
// CHECK-SAME: auto_choice = "1f1b"
// CHECK-SAME: kind = "policy"
// CHECK:      pipe.rank 0 stages [@s0] {
// CHECK-NEXT:   pipe.forward @s0 mb 0
// CHECK-NEXT:   pipe.forward @s0 mb 1
// CHECK-NEXT:   pipe.backward @s0 mb 0
// CHECK-NEXT:   pipe.forward @s0 mb 2
// CHECK-NEXT:   pipe.backward @s0 mb 1
// CHECK:      pipe.rank 1 stages [@s1] {
// CHECK-NEXT:   pipe.forward @s1 mb 0
// CHECK-NEXT:   pipe.backward @s1 mb 0
// PARAM: auto_choice = "zb-h1-rules offset=2"
// PARAM: pipe.backward_input @s1 mb 0
// BROKEN: pipe-schedule-policy.mlir:[[# @LINE + 5]]:1: error: {{.*}}broken.policy: line 3: 'Q' is not an action (F, B, I, W or X)
// DIV: error: policy div at ranks=2 microbatches=3 stages=2: warmup (line 3): column 7: division by zero in (ranks // k)
// MISSING: error: cannot read policy file {{.*}}missing.policy: No such file or directory
// RANGE: error: policy zb-h1-rules at ranks=2 microbatches=3 stages=2: parameter offset=7 is outside 0..4
// OUTSIDE: error: policy interleaved-1f1b at ranks=2 microbatches=3 stages=2: outside the policy's requires: ((microbatches % ranks) == 0) (line 9)
pipe.pipeline @p ranks(2) microbatches(3) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
