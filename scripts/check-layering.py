#!/usr/bin/env python3
"""The layering rules, checked on the sources (docs/architecture.md):

  scheduler/  MLIR-free: includes only scheduler/, LLVM Support, fmt, std;
              inside it, one way: model <- kinds <- search <- formats,
              model <- lower <- formats, lower <- policy <- search;
  kernels/    no runtime, dialect, passes, translate or MLIR;
  runtime/    no dialect, passes, translate or MLIR;
  dialect/, passes/: nothing from runtime/ or kernels/;
  translate/: nothing from runtime/ (kernels/ for profiling a spec).

    python3 scripts/check-layering.py [ROOT]     (default: the repository)

Prints each include that breaks a rule as FILE:LINE: rule, and exits 1 if
there is one.
"""

import os
import re
import sys

# Folder -> include prefixes it must not use, and why.
FORBIDDEN = {
    "scheduler": (("mlir/", "dialect/", "passes/", "translate/", "runtime/",
                   "kernels/", "tools/"),
                  "the scheduler is free of MLIR and of every layer above it"),
    "scheduler/model": (("scheduler/kinds/", "scheduler/search/",
                         "scheduler/lower/", "scheduler/formats/",
                         "scheduler/policy/"),
                        "the task model sits below every other scheduler "
                        "folder"),
    "scheduler/kinds": (("scheduler/search/", "scheduler/lower/",
                         "scheduler/formats/", "scheduler/policy/"),
                        "a kind knows only the model and the other kinds"),
    "scheduler/search": (("scheduler/lower/", "scheduler/formats/"),
                         "the searches know the kinds, the policies (their "
                         "candidates) and the model"),
    "scheduler/policy": (("scheduler/kinds/", "scheduler/search/",
                          "scheduler/formats/"),
                         "a policy instantiates on the model and verifies "
                         "through the lowering"),
    "scheduler/lower": (("scheduler/kinds/", "scheduler/search/",
                         "scheduler/formats/"),
                        "lowering takes any schedule: it knows the model "
                        "only"),
    "kernels": (("mlir/", "dialect/", "passes/", "translate/", "runtime/",
                 "tools/"),
                "kernels know neither the runtime nor MLIR"),
    "runtime": (("mlir/", "dialect/", "passes/", "translate/", "tools/"),
                "the runtime is free of MLIR and the dialect"),
    "dialect": (("runtime/", "kernels/", "passes/", "translate/", "tools/"),
                "the dialect sits below the passes and beside no runtime"),
    "passes": (("runtime/", "kernels/", "translate/", "tools/"),
               "passes sit below translate and know no runtime"),
    # PlanCompiler profiles a spec's stages with the kernels for
    # stagecraft-run; the runtime itself stays out.
    "translate": (("runtime/", "tools/"),
                  "translations know no runtime"),
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SOURCES = (".h", ".cpp", ".cu", ".td", ".inc")


def violations(root):
    for folder, (prefixes, why) in FORBIDDEN.items():
        top = os.path.join(root, folder)
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1).startswith(prefixes):
                            yield (os.path.relpath(path, root), number,
                                   m.group(1), why)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    found = list(violations(root))
    for path, number, target, why in found:
        print(f"{path}:{number}: includes {target}: {why}")
    print(f"check-layering: {len(found)} include(s) across the layers")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
