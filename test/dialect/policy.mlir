// RUN: stagecraft-opt %s | FileCheck %s
// RUN: stagecraft-opt %s | stagecraft-opt | FileCheck %s

// Tests that a pipe.policy prints back as written, one statement a line,
// and round-trips.
// CHECK-LABEL: pipe.policy @one_f_one_b {
// CHECK-NEXT:    "placement loop"
// CHECK-NEXT:    "warmup ranks - rank - 1"
// CHECK-NEXT:    "steady F B"
// CHECK-NEXT:    "requires chunks == 1"
// CHECK-NEXT:  }
pipe.policy @one_f_one_b {
  "placement loop"
  "warmup ranks - rank - 1"
  "steady F B"
  "requires chunks == 1"
}

// CHECK-LABEL: pipe.policy @zb attributes {note = "rules"} {
// CHECK-NEXT:    "param offset 0..4 = 1"
// CHECK-NEXT:    "rule I"
// CHECK-NEXT:    "rule F when in_flight < min(ranks, ranks - rank + offset)"
// CHECK-NEXT:    "rule W"
pipe.policy @zb attributes {note = "rules"} {
  "param offset 0..4 = 1"
  "rule I"
  "rule F when in_flight < min(ranks, ranks - rank + offset)"
  "rule W"
}
