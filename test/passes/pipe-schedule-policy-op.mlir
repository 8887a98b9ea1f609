// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="policy=@p" --pipe-verify-schedule -verify-diagnostics | FileCheck %s
// RUN: not stagecraft-opt %s --split-input-file --pipe-schedule="policy=@nope" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not stagecraft-opt %s --split-input-file --pipe-schedule="policy=@p policy-file=x.policy" 2>&1 | FileCheck %s --check-prefix=BOTH

// Tests scheduling by a pipe.policy of the module: 1F1B as phases gives
// 1F1B's order; a policy that leaves a rank with nothing to start, and a
// pipeline outside a policy's requires, are errors at the policy op naming
// the point and the reason, with a note at the pipeline.
// CHECK-LABEL: pipe.schedule @demo_p for @demo
// CHECK-SAME: auto_choice = "p"
// CHECK-SAME: kind = "policy"
// CHECK:      pipe.rank 0 stages [@s0] {
// CHECK-NEXT:   pipe.forward @s0 mb 0
// CHECK-NEXT:   pipe.forward @s0 mb 1
// CHECK-NEXT:   pipe.backward @s0 mb 0
// CHECK-NEXT:   pipe.forward @s0 mb 2
// CHECK:      pipe.rank 1 stages [@s1] {
// CHECK-NEXT:   pipe.forward @s1 mb 0
// CHECK-NEXT:   pipe.backward @s1 mb 0
// UNKNOWN: error: policy=@nope: the module has no pipe.policy @nope
// BOTH: error: pipe-schedule: give policy-file= or policy=, not both
pipe.policy @p {
  "placement loop"
  "warmup ranks - rank - 1"
  "steady F B"
  "requires chunks == 1"
}
pipe.pipeline @demo ranks(2) microbatches(3) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// expected-error @below {{policy p at ranks=2 microbatches=3 stages=2: no rank can start an action while 8 remain: rank 0: 0F1 is ready but no rule for it holds (in_flight 0); 0B1 waits for 0F1 | rank 1: 1F1 waits for 0F1}}
pipe.policy @p {
  "rule F when forwards_issued < 1"
  "rule B"
}
// expected-note @below {{applied to pipeline @demo}}
pipe.pipeline @demo ranks(2) microbatches(3) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// expected-error @below {{policy p at ranks=2 microbatches=3 stages=2: outside the policy's requires: ((microbatches % ranks) == 0) (statement 3)}}
pipe.policy @p {
  "warmup ranks - rank - 1"
  "steady F B"
  "requires microbatches % ranks == 0"
}
// expected-note @below {{applied to pipeline @demo}}
pipe.pipeline @demo ranks(2) microbatches(3) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
