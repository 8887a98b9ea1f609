#!/usr/bin/env python3
"""Branching-pipeline benchmark (simulated): a VLM-like model on 8 ranks,
32 microbatches, latency 0.05: a 24-layer vision encoder (each layer a
quarter of an LLM layer's cost and activation) in 4 stages of 6 layers, a
text embedding (0.1 of a layer), and a 32-layer LLM in 16 stages of 2
layers; per layer F = I = 1, W = 0.5, activation 1 (weight_grad 0.5).

- chain: what a user writes today, the encoder stages in front of the LLM
  stages, the text embedding folded into the first LLM stage;
- chain16: the same chain in 16 stages (2 per rank), so that the V and
  interleaved kinds apply: the encoder in 2 stages of 12 layers, the LLM
  in 4 stages of 3 layers and 10 of 2;
- graph: the 20-stage cut with inputs(...): the encoder and the text
  embedding feed the first LLM stage side by side;
- graph16: a 16-stage graph: the encoder in 2 stages of 12 layers, the
  text embedding, the LLM in 6 stages of 3 layers and 7 of 2.

Every kind that applies to each, and auto (time-limit as given), is
scheduled and simulated: step time (cost units) and the highest per-rank
peak activation memory. The last line compares graph-aware auto with the
best chain kind at the same memory (1F1B's budget, which zb-h1, zb-v and
auto keep) and with the best chain kind at any memory.

Usage: bench/vlm-graph-bench.py [BUILD_DIR] [TIME_LIMIT_S]  (defaults: build, 10)
"""
import os
import re
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
limit = sys.argv[2] if len(sys.argv) > 2 else "10"
opt = os.path.join(build, "bin", "stagecraft-opt")
if not os.access(opt, os.X_OK):
    sys.exit(f"error: {opt} not found; build first")
work = tempfile.mkdtemp()


def stage(name, layers, unit, inputs=None):
    f = layers * unit
    text = f"  pipe.stage @{name} "
    if inputs is not None:
        text += "inputs(" + ", ".join("@" + i for i in inputs) + ") "
    return text + (f"cost(forward = {f:.4g}, backward_input = {f:.4g}, "
                   f"backward_weight = {f / 2:.4g}) memory(activation = "
                   f"{f:.4g}, weight_grad = {f / 2:.4g})\n")


def spec(graph, sixteen=False):
    text = ("pipe.pipeline @vlm ranks(8) microbatches(32) latency(0.05) "
            "{\n")
    if sixteen and graph:
        text += stage("vit0", 12, 0.25, [])
        text += stage("vit1", 12, 0.25)
        text += stage("text", 1, 0.1, [])
        text += stage("llm0", 3, 1.0, ["vit1", "text"])
        for k in range(1, 13):
            text += stage(f"llm{k}", 3 if k < 6 else 2, 1.0)
        return text + "}\n"
    if sixteen:
        for k in range(2):
            text += stage(f"vit{k}", 12, 0.25)
        text += stage("llm0", 3.1, 1.0)  # the text embedding folded in
        for k in range(1, 14):
            text += stage(f"llm{k}", 3 if k < 4 else 2, 1.0)
        return text + "}\n"

    for k in range(4):
        text += stage(f"vit{k}", 6, 0.25, [] if graph and k == 0 else None)
    if graph:
        text += stage("text", 1, 0.1, [])
        text += stage("llm0", 2, 1.0, ["vit3", "text"])
    else:
        text += stage("llm0", 2.1, 1.0)  # the text embedding folded in
    for k in range(1, 16):
        text += stage(f"llm{k}", 2, 1.0)
    return text + "}\n"


def run(path, kind):
    done = subprocess.run(
        [opt, path, f"--pipe-schedule=kind={kind} time-limit={limit}",
         "--pipe-simulate"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=600)
    if done.returncode != 0:
        why = re.search(r"error: (.*)", done.stdout)
        return None, None, (why.group(1) if why else done.stdout)[:90]
    makespan = float(re.search(r"makespan = ([0-9.e+-]+)", done.stdout)
                     .group(1))
    peaks = re.search(r"peak_memory = array<f64: ([^>]*)>", done.stdout)
    peak = max(float(x) for x in peaks.group(1).split(","))
    choice = re.search(r'auto_choice = "([^"]*)"', done.stdout)
    bound = re.search(r"lower_bound = ([0-9.e+-]+)", done.stdout)
    note = choice.group(1) if choice else ""
    if bound:
        note += f"; lower bound over its placements {float(bound.group(1)):.2f}"
    return makespan, peak, note


rows = []
for layout in ("chain", "chain16", "graph", "graph16"):
    path = os.path.join(work, layout + ".mlir")
    with open(path, "w") as f:
        f.write(spec(layout.startswith("graph"), layout.endswith("16")))
    for kind in ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2",
                 "zb-v", "dualpipev", "auto"):
        rows.append((layout, kind) + run(path, kind))

print("VLM-like graph, 8 ranks, 32 microbatches: 24-layer encoder (4 stages), "
      "text embedding, 32-layer LLM (16 stages); simulated, cost units\n")
print("| layout | kind | step | peak memory | note |")
print("|---|---|---|---|---|")
for layout, kind, step, peak, note in rows:
    if step is None:
        print(f"| {layout} | {kind} | — | — | {note} |")
    else:
        print(f"| {layout} | {kind} | {step:.2f} | {peak:.2f} | {note} |")
graph_auto = min((r for r in rows if r[0].startswith("graph") and
                  r[1] == "auto"), key=lambda r: r[2])
budget = next(r for r in rows if r[:2] == ("chain", "1f1b"))[3]
chain = [r for r in rows if r[0].startswith("chain") and r[2] is not None]
same = min((r for r in chain if r[3] <= budget * (1 + 1e-9)),
           key=lambda r: r[2])
anyk = min(chain, key=lambda r: r[2])
print(f"\n{graph_auto[0]} auto {graph_auto[2]:.2f} (peak {graph_auto[3]:.2f}) against "
      f"the best chain kind within 1F1B's peak ({budget:.2f}): {same[0]} "
      f"{same[1]} "
      f"{same[2]:.2f} (peak {same[3]:.2f}), ratio "
      f"{graph_auto[2] / same[2]:.3f}; against the best chain kind at any "
      f"memory: {anyk[0]} {anyk[1]} {anyk[2]:.2f} (peak {anyk[3]:.2f}), ratio "
      f"{graph_auto[2] / anyk[2]:.3f}")
