// RUN: stagecraft-opt %s --split-input-file --pipe-verify-policy="ranks=2..8 microbatches=1..16 chunks=1..2" -verify-diagnostics
// RUN: not stagecraft-opt %s --split-input-file --pipe-verify-policy="ranks=4..2" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not stagecraft-opt %s --split-input-file --pipe-verify-policy="params=offset" 2>&1 | FileCheck %s --check-prefix=PARAMS

// Tests verifying policies over a family: 1F1B as phases holds wherever its
// requires does and the points outside are counted; a ZB-H1-like rules
// policy holds; 1F1B's
// rules without `requires chunks == 1` fail at the first point with two
// stages a rank (rank 1 may hold one activation and its second stage
// needs one more), naming the point and the reason.
// RANGE: pipe-verify-policy: ranks=4..2 is not LO..HI (or N) with 1 <= LO <= HI
// PARAMS: pipe-verify-policy: params: 'offset' is not NAME:INTEGER

// expected-remark @below {{policy @p holds on 112 points of ranks=2..8 microbatches=1..16 chunks=1..2 (112 outside its requires, skipped)}}
pipe.policy @p {
  "placement loop"
  "warmup ranks - rank - 1"
  "steady F B"
  "requires chunks == 1"
}

// -----

// expected-remark @below {{holds on}}
pipe.policy @p {
  "param offset 0..4 = 0"
  "rule I"
  "rule F when in_flight < min(ranks, ranks - rank + offset)"
  "rule W"
  "requires chunks == 1"
}

// -----

// expected-error @below {{policy q at ranks=2 microbatches=1 stages=4: no rank can start an action while 5 remain: rank 0: 2B0 waits for 3B0 | rank 1: 3F0 is ready but no rule for it holds (in_flight 1); 3B0 waits for 3F0}}
pipe.policy @q {
  "rule B"
  "rule F when in_flight < ranks - rank"
}
