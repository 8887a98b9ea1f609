"""Prints, for the measured and the simulated timeline of a stagecraft-run
trace, rank 1's forward start times in ms, and whether every measured one is
at least its simulated one less TOLERANCE ms.

  link-starts.py TRACE TOLERANCE
"""
import json
import sys

trace, tolerance = sys.argv[1], float(sys.argv[2])
events = json.load(open(trace))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events
         if e["name"] == "process_name"}
starts = {}
for e in events:
    if e["ph"] == "X" and e["tid"] == 1 and e["name"].startswith("1F"):
        starts.setdefault(names[e["pid"]], []).append(e["ts"] / 1000.0)
measured, simulated = sorted(starts["measured"]), sorted(starts["simulated"])
print("simulated", " ".join(f"{t:g}" for t in simulated))
late = all(m >= s - tolerance for m, s in zip(measured, simulated))
print("measured not before the link lets them:", "yes" if late else
      "no: " + " ".join(f"{t:.3f}" for t in measured))
