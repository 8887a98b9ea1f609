// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=gpipe" | FileCheck %s --check-prefix=GPIPE
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b" | FileCheck %s --check-prefix=1F1B
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule | FileCheck %s --check-prefix=1F1B
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b" --pipe-schedule="kind=1f1b" | FileCheck %s --check-prefix=TWICE

// Tests the orders on three ranks and three microbatches: GPipe runs every
// forward first; 1F1B warms rank r up with 2 - r forwards and alternates.
// GPIPE-LABEL: pipe.schedule @three_gpipe for @three attributes {kind = "gpipe"}
// GPIPE:      pipe.rank 0 stages [@a] {
// GPIPE-NEXT:   pipe.forward @a mb 0
// GPIPE-NEXT:   pipe.forward @a mb 1
// GPIPE-NEXT:   pipe.forward @a mb 2
// GPIPE-NEXT:   pipe.backward @a mb 0
// GPIPE-NEXT:   pipe.backward @a mb 1
// GPIPE-NEXT:   pipe.backward @a mb 2
// GPIPE:      pipe.rank 2 stages [@c] {
// GPIPE-NEXT:   pipe.forward @c mb 0
// GPIPE-NEXT:   pipe.forward @c mb 1
// GPIPE-NEXT:   pipe.forward @c mb 2
// GPIPE-NEXT:   pipe.backward @c mb 0

// 1F1B-LABEL: pipe.schedule @three_1f1b for @three attributes {kind = "1f1b"}
// 1F1B:      pipe.rank 0 stages [@a] {
// 1F1B-NEXT:   pipe.forward @a mb 0
// 1F1B-NEXT:   pipe.forward @a mb 1
// 1F1B-NEXT:   pipe.forward @a mb 2
// 1F1B-NEXT:   pipe.backward @a mb 0
// 1F1B-NEXT:   pipe.backward @a mb 1
// 1F1B-NEXT:   pipe.backward @a mb 2
// 1F1B:      pipe.rank 1 stages [@b] {
// 1F1B-NEXT:   pipe.forward @b mb 0
// 1F1B-NEXT:   pipe.forward @b mb 1
// 1F1B-NEXT:   pipe.backward @b mb 0
// 1F1B-NEXT:   pipe.forward @b mb 2
// 1F1B-NEXT:   pipe.backward @b mb 1
// 1F1B-NEXT:   pipe.backward @b mb 2
// 1F1B:      pipe.rank 2 stages [@c] {
// 1F1B-NEXT:   pipe.forward @c mb 0
// 1F1B-NEXT:   pipe.backward @c mb 0
// 1F1B-NEXT:   pipe.forward @c mb 1
// 1F1B-NEXT:   pipe.backward @c mb 1

// Tests that the spec stays and that scheduling again keeps both schedules.
// TWICE: pipe.pipeline @three
// TWICE: pipe.schedule @three_1f1b_0 for @three
// TWICE: pipe.schedule @three_1f1b for @three
pipe.pipeline @three ranks(3) microbatches(3) {
  pipe.stage @a cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @b cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @c cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that more stages than ranks go in contiguous blocks, which 1F1B runs
// as one unit: forwards in chain order, backwards reversed.
// GPIPE-LABEL: pipe.schedule @blocks_gpipe for @blocks
// GPIPE: pipe.rank 0 stages [@s0, @s1] {
// GPIPE: pipe.rank 1 stages [@s2] {
// 1F1B-LABEL: pipe.schedule @blocks_1f1b for @blocks
// 1F1B:      pipe.rank 0 stages [@s0, @s1] {
// 1F1B-NEXT:   pipe.forward @s0 mb 0
// 1F1B-NEXT:   pipe.forward @s1 mb 0
// 1F1B-NEXT:   pipe.forward @s0 mb 1
// 1F1B-NEXT:   pipe.forward @s1 mb 1
// 1F1B-NEXT:   pipe.backward @s1 mb 0
// 1F1B-NEXT:   pipe.backward @s0 mb 0
// 1F1B:      pipe.rank 1 stages [@s2] {
pipe.pipeline @blocks ranks(2) microbatches(2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that pins decide placement.
// 1F1B-LABEL: pipe.schedule @pinned_1f1b for @pinned
// 1F1B: pipe.rank 0 stages [@late] {
// 1F1B: pipe.rank 1 stages [@early] {
// 1F1B-NEXT: pipe.forward @early mb 0
pipe.pipeline @pinned ranks(2) microbatches(1) {
  pipe.stage @early rank(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @late rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
