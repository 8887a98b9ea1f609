// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" | stagecraft-translate --pipe-to-summary --timeline-width=66 | FileCheck %s
// RUN: not stagecraft-translate --pipe-to-summary %examples/demo.mlir 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" --pipe-schedule="kind=gpipe" | not stagecraft-translate --pipe-to-summary 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" --pipe-schedule="kind=gpipe" | stagecraft-translate --pipe-to-summary --schedule-name=demo_gpipe | FileCheck %s --check-prefix=CHOSEN
// RUN: not stagecraft-translate --pipe-to-summary %t.does-not-exist 2>&1 | FileCheck %s --check-prefix=FILE

// Tests the summary: figures, per-rank table (busy time, span from first
// start to last end, peak memory) and a timeline at 2 columns per unit.
// CHECK: schedule @demo_1f1b for @demo: 4 ranks, 4 stages, 8 microbatches, latency 0 time units
// CHECK-NEXT: makespan 33, bubble ratio 0.2727, lower bound 27 (makespan / bound 1.2222)
// CHECK-NEXT: lower bound: no schedule with this placement of stages on ranks ends sooner (the longest rank's work plus the forward chain it must wait for; memory ignored)
// CHECK-NEXT: span 33 (largest per-rank span, first start to last end on one rank: the zero-bubble papers' figure)
// CHECK-NEXT:  rank        busy        span   peak memory  stages
// CHECK-NEXT:     0          24          33             4  @s0
// CHECK-NEXT:     1          24          30             3  @s1
// CHECK-NEXT:     2          24          27             2  @s2
// CHECK-NEXT:     3          24          24             1  @s3
// CHECK-NEXT: timeline: 1 column = 0.5 time units
// CHECK-NEXT: rank 0 |F0F1F2F3............B0  F4B1  F5B2  F6B3  F7B4  ..B5  ..B6  ..B7  |
// CHECK-NEXT: rank 1 |..F0F1F2........B0  F3B1  F4B2  F5B3  F6B4  F7B5  ..B6  ..B7  ....|
// CHECK-NEXT: rank 2 |....F0F1....B0  F2B1  F3B2  F4B3  F5B4  F6B5  F7B6  ..B7  ........|
// CHECK-NEXT: rank 3 |......F0B0  F1B1  F2B2  F3B3  F4B4  F5B5  F6B6  F7B7  ............|
// CHECK-NEXT: legend: F forward, B whole backward, . idle; the number after a letter is the microbatch
// CHECK-NOT: note:
// NONE: error: no pipe.schedule in the input; run stagecraft-opt --pipe-schedule first
// MANY: error: 2 pipe.schedule ops in the input; choose one with --schedule-name
// CHOSEN: schedule @demo_gpipe for @demo
// FILE: does-not-exist

// Too narrow for the microbatch numbers: the letters alone, counted, with
// the width that shows them, and a legend for every letter drawn.
// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=zb-h1" | stagecraft-translate --pipe-to-summary --timeline-width=40 | FileCheck %s --check-prefix=NARROW
// NARROW: rank 0 |FFFF...IWFIWFIWFIWFIWIWIWIW|
// NARROW: legend: F forward, I backward for the input gradient, W backward for the weight gradient, . idle; the number after a letter is the microbatch
// NARROW-NEXT: note: 96 actions are too narrow here to show their microbatch number (drawn as letters only); --timeline-width=54 shows every number
// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=zb-h1" | stagecraft-translate --pipe-to-summary --timeline-width=54 | FileCheck %s --check-prefix=WIDE
// WIDE: rank 0 |F0F1F2F3
// WIDE-NOT: note:
// Two stages per rank: lowercase for the second, said in the legend.
// RUN: stagecraft-opt %examples/interleaved.mlir --pipe-schedule="kind=interleaved-1f1b chunks=2" | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=CHUNKS
// CHUNKS: legend: F forward, B whole backward, . idle; the number after a letter is the microbatch; lowercase: the rank's 2nd, 4th, ... stage
