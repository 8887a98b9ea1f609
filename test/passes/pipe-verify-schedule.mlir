// RUN: stagecraft-opt %s --split-input-file --pipe-verify-schedule --verify-diagnostics | FileCheck %s

// Tests that a valid hand-written schedule with split backward passes and is
// left unchanged.
// CHECK-LABEL: pipe.schedule @ok for @p
// CHECK-NEXT: pipe.rank 0 stages [@s0]
pipe.pipeline @p ranks(2) microbatches(2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
pipe.schedule @ok for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.forward @s0 mb 1
    pipe.backward_input @s0 mb 0
    pipe.backward_input @s0 mb 1
    pipe.backward_weight @s0 mb 1
    pipe.backward_weight @s0 mb 0
  }
  pipe.rank 1 stages [@s1] {
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
    pipe.forward @s1 mb 1
    pipe.backward @s1 mb 1
  }
}

// -----

// Tests a schedule that deadlocks: rank 1 wants microbatch 1 first, while
// rank 0 waits for microbatch 0's gradient before it sends microbatch 1.
pipe.pipeline @p ranks(2) microbatches(2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// expected-error @below {{'pipe.schedule' op schedule deadlocks: no execution order satisfies the dependencies; stuck ranks: 0, 1}}
pipe.schedule @stuck for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    // expected-note @below {{rank 0 is stuck at 0B0, which waits for 1B0 on rank 1 (position 3 there)}}
    pipe.backward @s0 mb 0
    pipe.forward @s0 mb 1
    pipe.backward @s0 mb 1
  }
  pipe.rank 1 stages [@s1] {
    // expected-note @below {{rank 1 is stuck at 1F1, which waits for 0F1 on rank 0 (position 2 there)}}
    pipe.forward @s1 mb 1
    pipe.backward @s1 mb 1
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
  }
}

// -----

// Tests a rank that waits on itself: W before its I.
pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// expected-error @below {{'pipe.schedule' op schedule deadlocks: no execution order satisfies the dependencies; stuck ranks: 0}}
pipe.schedule @self for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    // expected-note @below {{rank 0 is stuck at 0W0, which waits for 0I0 on rank 0 (position 2 there)}}
    pipe.backward_weight @s0 mb 0
    pipe.backward_input @s0 mb 0
  }
}
