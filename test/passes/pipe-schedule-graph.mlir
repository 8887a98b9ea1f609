// RUN: stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule=kind=gpipe --pipe-verify-schedule --pipe-simulate | FileCheck %s --check-prefix=GPIPE
// RUN: stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule=kind=1f1b --pipe-verify-schedule --pipe-simulate | FileCheck %s --check-prefix=ONEF
// RUN: stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule=kind=zb-h1 --pipe-verify-schedule --pipe-simulate | FileCheck %s --check-prefix=ZBH1
// RUN: stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule=kind=auto --pipe-verify-schedule --pipe-simulate | FileCheck %s --check-prefix=AUTO
// RUN: stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule=kind=1f1b --pipe-insert-comm --pipe-verify-schedule | FileCheck %s --check-prefix=COMM
// RUN: not stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule=kind=zb-v 2>&1 | FileCheck %s --check-prefix=CHAIN
// RUN: not stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule=kind=interleaved-1f1b 2>&1 | FileCheck %s --check-prefix=CHAIN
// RUN: stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule=kind=zb-h1 | stagecraft-translate --pipe-to-csv 2>&1 | FileCheck %s --check-prefix=CSV

// Tests a branching pipeline (Inputs/diamond.mlir): gpipe, 1f1b and zb-h1
// place the stages in contiguous blocks in the order written (so both
// branches share rank 1); auto places the branches side by side (the long
// @b0 alone on a rank), 39.1 against 56.1 for zb-h1, 2.6 % above the
// lowest lower bound over the placements it tries (38.1). The chain kinds
// refuse the graph with one line.
// GPIPE: makespan = 66.6{{0*[0-9]*}} : f64
// ONEF: makespan = 6.060000e+01
// ONEF: pipe.rank 0 stages [@src, @a0]
// ONEF-NEXT: pipe.forward @src mb 0
// ONEF-NEXT: pipe.forward @a0 mb 0
// ZBH1: makespan = 5.610000e+01
// AUTO: lower_bound = 3.810000e+01 : f64, makespan = 3.910000e+01
// AUTO: pipe.rank 0 stages [@join]
// AUTO: pipe.rank 1 stages [@a1, @head]
// AUTO: pipe.rank 2 stages [@src, @a0]
// AUTO: pipe.rank 3 stages [@b0]

// @src's output goes to both branches' stages; on rank 1 they share one
// receive. @join's backward sends its inputs' gradient to rank 1 (both @a1
// and @b0 there) once; @src's backward waits for the gradients of @a0 (on
// its own rank) and @b0 (received).
// COMM: pipe.rank 0 stages [@src, @a0]
// COMM: pipe.send_activation @src mb 0 to 1
// COMM-NOT: pipe.send_activation @src mb 0
// COMM: pipe.recv_gradient @b0 mb 0 from 1
// COMM-NEXT: pipe.backward @src mb 0
// COMM: pipe.rank 1 stages [@a1, @b0]
// COMM: pipe.recv_activation @src mb 0 from 0
// COMM-NOT: pipe.recv_activation @src mb 0
// COMM: pipe.rank 2 stages [@join]
// COMM: pipe.recv_activation @a1 mb 0 from 1
// COMM-NEXT: pipe.recv_activation @b0 mb 0 from 1
// COMM-NEXT: pipe.forward @join mb 0
// COMM: pipe.send_gradient @join mb 0 to 1
// COMM-NOT: pipe.send_gradient @join mb 0

// CHAIN: error: cannot schedule pipeline @diamond as {{zb-v|interleaved-1f1b}}: {{zb-v|interleaved-1f1b}} is built on a chain of stages, and pipeline @diamond branches (inputs(...)): its placement walks the stages in order, which a graph does not have; use gpipe, 1f1b, zb-h1, zb-h2 or auto

// CSV: warning: pipeline @diamond branches (inputs(...)): the CSV lists its stages in topological order, but torch.distributed.pipelining passes one tensor from each stage to the next, so torch cannot run this schedule
