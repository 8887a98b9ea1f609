// RUN: stagecraft-opt %s --pipe-schedule="kind=zb-h1" --pipe-verify-schedule --pipe-simulate | FileCheck %s --check-prefix=H1
// RUN: stagecraft-opt %s --pipe-schedule="kind=zb-h2" --pipe-verify-schedule --pipe-simulate | FileCheck %s --check-prefix=H2
// RUN: stagecraft-opt %s --pipe-schedule="kind=1f1b" --pipe-simulate | FileCheck %s --check-prefix=BASE

// Tests ZB-H1 on 2 ranks x 3 microbatches: 1F1B's order of F and I, with W
// moved into the time 1F1B leaves idle; makespan (p - 1)(F + I - W) +
// m(F + I + W) = 10 against 1F1B's 12, peak memory 2 like 1F1B's rank 0.
// H1-LABEL: pipe.schedule @two_zb_h1 for @two
// H1-SAME: makespan = 1.000000e+01 : f64
// H1-SAME: peak_memory = array<f64: 2.000000e+00, 2.000000e+00>
// H1:      pipe.rank 0 stages [@s0] {
// H1-NEXT:   pipe.forward @s0 mb 0
// H1-NEXT:   pipe.forward @s0 mb 1
// H1-NEXT:   pipe.backward_input @s0 mb 0
// H1-NEXT:   pipe.backward_weight @s0 mb 0
// H1-NEXT:   pipe.forward @s0 mb 2
// H1-NEXT:   pipe.backward_input @s0 mb 1
// H1-NEXT:   pipe.backward_weight @s0 mb 1
// H1-NEXT:   pipe.backward_input @s0 mb 2
// H1-NEXT:   pipe.backward_weight @s0 mb 2
// H1-NEXT: }
// H1:      pipe.rank 1 stages [@s1] {
// H1-NEXT:   pipe.forward @s1 mb 0
// H1-NEXT:   pipe.backward_input @s1 mb 0
// H1-NEXT:   pipe.forward @s1 mb 1
// H1-NEXT:   pipe.backward_input @s1 mb 1
// H1-NEXT:   pipe.backward_weight @s1 mb 0
// H1-NEXT:   pipe.forward @s1 mb 2
// H1-NEXT:   pipe.backward_input @s1 mb 2
// H1-NEXT:   pipe.backward_weight @s1 mb 1
// H1-NEXT:   pipe.backward_weight @s1 mb 2

// Tests ZB-H2 reaching the parallelogram bound (p - 1)F + m(F + I + W) = 10.
// H2-LABEL: pipe.schedule @two_zb_h2 for @two
// H2-SAME: makespan = 1.000000e+01 : f64
// BASE: makespan = 1.200000e+01 : f64
pipe.pipeline @two ranks(2) microbatches(3) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
