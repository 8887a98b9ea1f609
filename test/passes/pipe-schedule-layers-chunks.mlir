// RUN: stagecraft-opt %s --pipe-schedule=kind=auto --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-partition="stages=8 placement=loop" --pipe-schedule=kind=interleaved-1f1b --pipe-simulate | FileCheck %s --check-prefix=TWO
// RUN: stagecraft-opt %s --pipe-partition="stages=8 placement=v" --pipe-schedule=kind=zb-v --pipe-simulate | FileCheck %s --check-prefix=V

// Tests that kind=auto on a layer pipeline tries more than two stages per
// rank: with no weight gradient to defer (backward_weight = 0) and few
// microbatches, interleaved 1F1B's bubble shrinks with every stage a rank
// hosts, so four per rank (one layer each) wins: 57 against 66 with two per
// rank and 72 for zb-v.

// CHECK: auto_choice = "interleaved-1f1b on 16 stages (layers 0-0 | 1-1 | 2-2 | 3-3 | 4-4 | 5-5 | 6-6 | 7-7 | 8-8 | 9-9 | 10-10 | 11-11 | 12-12 | 13-13 | 14-14 | 15-15)"
// CHECK-SAME: makespan = 5.700000e+01
// TWO: makespan = 6.600000e+01
// V: makespan = 7.200000e+01
pipe.pipeline @deep ranks(4) microbatches(4) {
  pipe.layer @block count(16) cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) memory(activation = 1.0)
}
