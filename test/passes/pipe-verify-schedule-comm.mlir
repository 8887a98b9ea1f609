// RUN: stagecraft-opt %s --split-input-file --pipe-verify-schedule --verify-diagnostics

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a hand-written exchange that hangs although the actions alone could
// run: rank 0 blocks on the gradient before it sends the activation the
// gradient is computed from; rank 1 blocks on that activation.
// expected-error @below {{'pipe.schedule' op communication deadlocks: ranks 0, 1 wait forever; cycle 0 -> 1 -> 0}}
pipe.schedule @hang for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    // expected-note @below {{rank 0 waits at recv grad(@s1, mb 0) from rank 1 (instruction 1), matched by instruction 3 of rank 1, which is at instruction 0}}
    pipe.recv_gradient @s1 mb 0 from 1
    pipe.send_activation @s0 mb 0 to 1
    pipe.backward @s0 mb 0
  }
  pipe.rank 1 stages [@s1] {
    // expected-note @below {{rank 1 waits at recv act(@s0, mb 0) from rank 0 (instruction 0), matched by instruction 2 of rank 0, which is at instruction 1}}
    pipe.recv_activation @s0 mb 0 from 0
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
    pipe.send_gradient @s1 mb 0 to 0
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests that the same exchange in one group is posted at once and passes.
pipe.schedule @grouped for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.group {
      pipe.recv_gradient @s1 mb 0 from 1
      pipe.send_activation @s0 mb 0 to 1
    }
    pipe.backward @s0 mb 0
  }
  pipe.rank 1 stages [@s1] {
    pipe.recv_activation @s0 mb 0 from 0
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
    pipe.send_gradient @s1 mb 0 to 0
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests sends whose channel order differs from the receiver's: in-order
// matching would hand microbatch 1's activation to microbatch 0.
pipe.schedule @swapped for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.forward @s0 mb 1
    // expected-error @below {{'pipe.schedule' op channel 0 -> 1: send #0 carries act(@s0, mb 1) but the receive it is matched with expects act(@s0, mb 0)}}
    pipe.send_activation @s0 mb 1 to 1
    pipe.send_activation @s0 mb 0 to 1
    pipe.recv_gradient @s1 mb 0 from 1
    pipe.backward @s0 mb 0
    pipe.recv_gradient @s1 mb 1 from 1
    pipe.backward @s0 mb 1
  }
  pipe.rank 1 stages [@s1] {
    // expected-note @below {{the matched receive}}
    pipe.recv_activation @s0 mb 0 from 0
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
    pipe.send_gradient @s1 mb 0 to 0
    pipe.recv_activation @s0 mb 1 from 0
    pipe.forward @s1 mb 1
    pipe.backward @s1 mb 1
    pipe.send_gradient @s1 mb 1 to 0
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a compute whose input was never received.
pipe.schedule @missing for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.send_activation @s0 mb 0 to 1
    pipe.recv_gradient @s1 mb 0 from 1
    pipe.backward @s0 mb 0
  }
  pipe.rank 1 stages [@s1] {
    // expected-error @below {{'pipe.schedule' op forward @s1 mb 0 needs act(@s0, mb 0) from rank 0, which rank 1 has not received before it}}
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
    pipe.send_gradient @s1 mb 0 to 0
  }
}
