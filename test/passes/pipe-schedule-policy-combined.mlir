// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="policy=@p" --pipe-verify-schedule | FileCheck %s

// Tests phases beside a rule: the phases order F and I (1F1B's shape),
// `rule W` fills the waits: the last rank runs the W of microbatches 0 and
// 1 while its third forward is on its way, and the rest at the end.
// CHECK-LABEL: pipe.schedule @two_p for @two
// CHECK:      pipe.rank 1 stages [@s1] {
// CHECK-NEXT:   pipe.forward @s1 mb 0
// CHECK-NEXT:   pipe.backward_input @s1 mb 0
// CHECK-NEXT:   pipe.forward @s1 mb 1
// CHECK-NEXT:   pipe.backward_input @s1 mb 1
// CHECK-NEXT:   pipe.backward_weight @s1 mb 0
// CHECK-NEXT:   pipe.backward_weight @s1 mb 1
// CHECK-NEXT:   pipe.forward @s1 mb 2
// CHECK-NEXT:   pipe.backward_input @s1 mb 2
// CHECK-NEXT:   pipe.backward_weight @s1 mb 2
pipe.policy @p {
  "warmup ranks - rank - 1"
  "steady F I"
  "rule W"
  "cap ranks"
}
pipe.pipeline @two ranks(2) microbatches(3) latency(0.5) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests X in a pattern: after its warm-up forwards, a rank runs a forward
// overlapped with a backward as one action.
// CHECK-LABEL: pipe.schedule @two_p for @two
// CHECK:      pipe.rank 1 stages [@s1] {
// CHECK-NEXT:   pipe.forward @s1 mb 0
// CHECK-NEXT:   pipe.forward_backward @s1 mb 1, @s1 mb 0
// CHECK-NEXT:   pipe.forward_backward @s1 mb 2, @s1 mb 1
// CHECK-NEXT:   pipe.backward @s1 mb 2
pipe.policy @p {
  "warmup ranks - rank"
  "steady X"
}
pipe.pipeline @two ranks(2) microbatches(3) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
}
