// A policy in the module beside the pipeline it schedules: ZB-H1-like
// rules whose parameter lets the later ranks hold more activations, on four
// ranks with a heavy last stage (an LM head). Instantiate it, search its
// parameter, let auto weigh it against its own search, or verify it over a
// family (docs/policies.md):
//   stagecraft-opt examples/policy.mlir --pipe-schedule="policy=@zb params=offset:2"
//   stagecraft-opt examples/policy.mlir --pipe-schedule="kind=policy-search policy=@zb"
//   stagecraft-opt examples/policy.mlir --pipe-schedule="kind=auto"
//   stagecraft-opt examples/policy.mlir --pipe-verify-policy="ranks=2..16 microbatches=1..32"
pipe.policy @zb {
  "param offset 0..4 = 0"
  "rule I"
  "rule F when in_flight < min(ranks, ranks - rank + offset)"
  "rule W"
  "requires chunks == 1"
}

pipe.pipeline @head ranks(4) microbatches(8) latency(0.05) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s3 cost(forward = 1.6, backward_input = 1.6, backward_weight = 1.6) memory(activation = 1.0, weight_grad = 0.5)
}
