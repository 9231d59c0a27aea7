#!/usr/bin/env python3
"""Whether a benchmark's headline figure has settled (#61).

A bench script appends its headline figure (a paired ratio, one a round) to
FILE after each round. `check` exits 0 when the 95% interval of the
figure's median (distribution-free, from order statistics; min to max
below 6 rounds) lies within +-TARGET% of the median (default 5: two
invocations' medians then agree within about 10%), 1 when it does not yet;
`say` prints the figure with its interval and, when it is wider, says
plainly that the host was too noisy for a 10% comparison.

Usage: settle.py check FILE [TARGET_PCT]
       settle.py say FILE NAME [TARGET_PCT]
"""
import math
import statistics
import sys


def interval(values):
    """The median's 95% interval: order statistics k and n+1-k (1-based),
    k the largest with P(Binomial(n, 1/2) < k) <= 2.5%; min-max when no k
    qualifies (n < 6, coverage 1 - 2^(1-n))."""
    v = sorted(values)
    n = len(v)
    k, below = 0, 0.0
    for j in range(n):
        below += math.comb(n, j) / 2**n
        if below > 0.025:
            break
        k = j + 1
    k = max(k, 1)
    return v[k - 1], v[n - k]


def read(path):
    return [float(x) for x in open(path).read().split()]


def settled(values, target):
    if len(values) < 3:
        return False, float("inf")
    med = statistics.median(values)
    lo, hi = interval(values)
    half = max(med - lo, hi - med) / abs(med) * 100 if med else float("inf")
    return half <= target, half


def main(argv):
    if len(argv) < 3 or argv[1] not in ("check", "say"):
        print(__doc__, file=sys.stderr)
        return 2
    values = read(argv[2])
    if argv[1] == "check":
        target = float(argv[3]) if len(argv) > 3 else 5.0
        return 0 if settled(values, target)[0] else 1
    name = argv[3] if len(argv) > 3 else "the headline figure"
    target = float(argv[4]) if len(argv) > 4 else 5.0
    ok, half = settled(values, target)
    med = statistics.median(values)
    lo, hi = interval(values)
    line = f"{name}: median {med:.3f}, 95% interval {lo:.3f}-{hi:.3f} (+-{half:.1f}%), {len(values)} rounds"
    if ok:
        print(f"{line}: settled (within +-{target:g}%, so invocations agree within about {2 * target:g}%)")
    else:
        print(f"{line}: the host was too noisy: still wider than +-{target:g}% after "
              f"{len(values)} rounds, so a second invocation's median may differ by more than "
              f"{2 * target:g}%; compare only figures from one run")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
