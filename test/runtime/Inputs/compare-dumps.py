"""Compares two training dump directories (stagecraft-run --dump-grads or
--dump-weights): the same files, every float32 array within a relative L2
error of TOL, and the same losses. Prints the largest error seen.

  compare-dumps.py A B TOL
"""
import array
import math
import os
import sys

a_dir, b_dir, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
names = sorted(os.listdir(a_dir))
if names != sorted(os.listdir(b_dir)):
    sys.exit("different files: %s vs %s" % (names, sorted(os.listdir(b_dir))))
worst = 0.0
for name in names:
    pa, pb = os.path.join(a_dir, name), os.path.join(b_dir, name)
    if name.endswith(".txt"):
        xa = [float(x) for x in open(pa).read().split()]
        xb = [float(x) for x in open(pb).read().split()]
    else:
        xa, xb = array.array("f"), array.array("f")
        xa.frombytes(open(pa, "rb").read())
        xb.frombytes(open(pb, "rb").read())
    if len(xa) != len(xb) or not xa:
        sys.exit("%s: %d values vs %d" % (name, len(xa), len(xb)))
    diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(xa, xb)))
    norm = math.sqrt(sum(y * y for y in xb)) or 1.0
    worst = max(worst, diff / norm)
    if diff / norm > tol:
        sys.exit("%s: relative error %.3g above %g" % (name, diff / norm, tol))
print("%d files match, largest relative error %.3g" % (len(names), worst))
