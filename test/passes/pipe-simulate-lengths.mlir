// RUN: stagecraft-opt %s --pipe-schedule=kind=gpipe --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule=kind=gpipe | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=SUMMARY
// RUN: stagecraft-opt %s --pipe-schedule=kind=gpipe | stagecraft-translate --pipe-to-plan --unit-bytes=1000 -o %t.json
// RUN: %python -c "import json,sys; p=json.load(open(sys.argv[1])); print(sorted({(o['op'], o['tag'] & 0xffff, o['bytes']) for r in p['ranks'] for o in r['ops'] if o['op'] in ('send', 'recv')}))" %t.json | FileCheck %s --check-prefix=PLAN

// Tests microbatches of different lengths: lengths 1 and 3 around the
// reference 2 (their mean), linear scaling, so microbatch 0 costs and
// holds half of what the stage gives, microbatch 1 one and a half. GPipe:
//   rank 0: F0 [0,0.5] F1 [0.5,2]
//   rank 1: F0 [0.5,1] F1 [2,3.5] B0 [3.5,4.5] B1 [4.5,7.5]
//   rank 0: B0 [4.5,5.5] B1 [7.5,10.5]
// Rank 0 holds both activations at once: 2 x 0.5 + 2 x 1.5 = 4.
// CHECK: makespan = 1.050000e+01
// CHECK-SAME: peak_memory = array<f64: 4.000000e+00, 4.000000e+00>
// SUMMARY: makespan 10.5,

// Messages follow the length: output 1 x 1000 bytes x 0.5 and x 1.5.
// PLAN: [('recv', 0, 500), ('recv', 1, 1500), ('send', 0, 500), ('send', 1, 1500)]
pipe.pipeline @var ranks(2) microbatches(2) lengths(1, 3) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0) output(1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0) output(1.0)
}
