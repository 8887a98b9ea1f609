// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" | stagecraft-translate --pipe-to-csv | FileCheck %s
// RUN: stagecraft-opt %examples/demo.mlir --pipe-schedule="kind=1f1b" | stagecraft-translate --pipe-to-csv > %t.csv
// RUN: stagecraft-translate --pipe-from-csv --pipe-spec=%examples/demo.mlir %t.csv | stagecraft-translate --pipe-to-csv | %python -c "import sys; sys.exit(open(sys.argv[1]).read() != sys.stdin.read())" %t.csv

// Tests the PyTorch CSV of 1F1B on 4 ranks x 8 microbatches: one row per
// rank, `<stage><F|B><mb>` cells, global stage indices; and that importing
// the CSV gives back the same schedule.
// CHECK:      0F0,0F1,0F2,0F3,0B0,0F4,0B1,0F5,0B2,0F6,0B3,0F7,0B4,0B5,0B6,0B7
// CHECK-NEXT: 1F0,1F1,1F2,1B0,1F3,1B1,1F4,1B2,1F5,1B3,1F6,1B4,1F7,1B5,1B6,1B7
// CHECK-NEXT: 2F0,2F1,2B0,2F2,2B1,2F3,2B2,2F4,2B3,2F5,2B4,2F6,2B5,2F7,2B6,2B7
// CHECK-NEXT: 3F0,3B0,3F1,3B1,3F2,3B2,3F3,3B3,3F4,3B4,3F5,3B5,3F6,3B6,3F7,3B7
// CHECK-EMPTY:
