// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" | stagecraft-translate --pipe-to-chrome-trace > %t.json
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); ev=[e for e in d['traceEvents'] if e['ph']=='X']; print(len(ev), len({e['tid'] for e in ev}), max(e['ts']+e['dur'] for e in ev))" %t.json | FileCheck %s
// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" | stagecraft-translate --pipe-to-chrome-trace | FileCheck %s --check-prefix=NAMES

// Tests the trace of 1F1B on 4 ranks x 8 microbatches: 64 complete events on
// 4 rank tracks ending at the makespan, 33 units = 33 ms.
// CHECK: 64 4 33000{{$}}
// NAMES: {"args":{"name":"simulated demo_1f1b"},"name":"process_name","ph":"M","pid":0}
// NAMES-SAME: {"args":{"name":"rank 0"},"name":"thread_name","ph":"M","pid":0,"tid":0}
// NAMES-SAME: {"args":{"microbatch":0,"stage":"s0"},"cat":"forward","dur":1000,"name":"0F0","ph":"X","pid":0,"tid":0,"ts":0}
