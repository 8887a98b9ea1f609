// Eight equal stages on four ranks, two a rank, whose forward overlapped
// with a backward (DualPipe's F&B) costs 2.2 against F + B = 3: the
// interleaved-1f1b-overlap policy against interleaved-1f1b (docs/policies.md).
//   stagecraft-opt examples/overlap.mlir --pipe-schedule="policy-file=examples/policies/interleaved-1f1b-overlap.policy" --pipe-simulate
pipe.pipeline @overlap ranks(4) microbatches(8) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.2)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.2)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.2)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.2)
  pipe.stage @s4 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.2)
  pipe.stage @s5 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.2)
  pipe.stage @s6 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.2)
  pipe.stage @s7 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.2)
}
