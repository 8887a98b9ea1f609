// Four identical stages on four ranks, eight microbatches: the pipeline of
// the README. Try any kind:
//   stagecraft-opt examples/demo.mlir --pipe-schedule="kind=1f1b" \
//     --pipe-verify-schedule --pipe-simulate | stagecraft-translate --pipe-to-summary
pipe.pipeline @demo ranks(4) microbatches(8) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
