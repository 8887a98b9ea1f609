// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" | stagecraft-translate --pipe-to-plan --unit-bytes=256 > %t.json
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['ranks']; print(d['format'], d['version'], len(r), d['simulated_makespan'], [sum(o['op']=='compute' for o in x['ops']) for x in r], len(r[0]['slots']))" %t.json | FileCheck %s
// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" --pipe-insert-comm | stagecraft-translate --pipe-to-plan --unit-bytes=256 | %python -c "import json,sys; print(json.load(sys.stdin)['schedule'])" | FileCheck %s --check-prefix=COMM

// Tests the versioned plan: 4 ranks of 16 computes each, the simulated
// makespan carried along, slots per rank; the same with communication
// already in the IR.
// CHECK: stagecraft-plan 2 4 33 [16, 16, 16, 16] 10
// COMM: demo_1f1b
