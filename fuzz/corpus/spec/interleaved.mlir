// Eight identical stages on four ranks, twelve microbatches (not a multiple
// of the ranks). 1F1B places two consecutive stages per rank; interleaved
// 1F1B places stage s on rank s mod 4 and halves the bubble:
//   stagecraft-opt examples/interleaved.mlir --pipe-schedule="kind=interleaved-1f1b chunks=2" \
//     --pipe-simulate | stagecraft-translate --pipe-to-summary
pipe.pipeline @interleaved ranks(4) microbatches(12) latency(0.05) {
  pipe.stage @s0 cost(forward = 0.5, backward_input = 0.55, backward_weight = 0.45)
  pipe.stage @s1 cost(forward = 0.5, backward_input = 0.55, backward_weight = 0.45)
  pipe.stage @s2 cost(forward = 0.5, backward_input = 0.55, backward_weight = 0.45)
  pipe.stage @s3 cost(forward = 0.5, backward_input = 0.55, backward_weight = 0.45)
  pipe.stage @s4 cost(forward = 0.5, backward_input = 0.55, backward_weight = 0.45)
  pipe.stage @s5 cost(forward = 0.5, backward_input = 0.55, backward_weight = 0.45)
  pipe.stage @s6 cost(forward = 0.5, backward_input = 0.55, backward_weight = 0.45)
  pipe.stage @s7 cost(forward = 0.5, backward_input = 0.55, backward_weight = 0.45)
}
