// RUN: stagecraft-opt %s --pipe-verify-policy="policy=@zb pipeline=@demo ranks=2..4 microbatches=4 params=offset:1" 2>&1 | FileCheck %s
// RUN: not stagecraft-opt %s --pipe-verify-policy="policy=@nope" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not stagecraft-opt %s --pipe-verify-policy="policy=@zb pipeline=@nope" 2>&1 | FileCheck %s --check-prefix=NOPIPE

// Tests a family on a pipeline's own costs and latency with a parameter
// set, and the options that name what the module does not hold.
// CHECK: remark: policy @zb holds on 3 points of ranks=2..4 microbatches=4..4 chunks=1..1 (0 outside its requires, skipped)
// UNKNOWN: error: pipe-verify-policy: policy=@nope: the module has no such pipe.policy
// NOPIPE: error: pipe-verify-policy: pipeline=@nope: the module has no such pipe.pipeline
pipe.policy @zb {
  "param offset 0..4 = 0"
  "rule I"
  "rule F when in_flight < min(ranks, ranks - rank + offset)"
  "rule W"
  "requires chunks == 1"
}
pipe.pipeline @demo ranks(2) microbatches(3) latency(0.25) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.5, backward_weight = 0.5) memory(activation = 2.0, weight_grad = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.5, backward_weight = 0.5) memory(activation = 2.0, weight_grad = 1.0)
}
