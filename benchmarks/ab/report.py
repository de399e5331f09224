"""Medians per operation of the A/B runs in a directory (benchmarks/ab/run), old against new."""

import glob
import json
import statistics
import sys


def medians(out, suite, side):
    times = {}
    runs = sorted(glob.glob(f"{out}/{suite}-{side}-*/results.json"))
    for f in runs:
        results = json.load(open(f))["results"]
        rows = results["mpiws"] if suite == "pp" else next(iter(results.values()))["mpiws"]
        for row in rows:
            times.setdefault((row["kind"], str(row["key"])), []).append(row["t"])
    return {k: statistics.median(v) for k, v in times.items()}, len(runs)


def main(out):
    for suite, title in (("pp", "ping-pong, 2 ranks"), ("co", "collectives, 4 ranks (auto rows shown)")):
        old, n_old = medians(out, suite, "old")
        new, n_new = medians(out, suite, "new")
        print(f"## {title}: median of {n_old} runs (old) and {n_new} runs (new)\n")
        print("| operation | size | old (us) | new (us) | new / old |\n|---|---|---:|---:|---:|")
        ratios = []
        for k in sorted(set(old) & set(new)):
            ratios.append(new[k] / old[k])
            if suite == "pp" or k[1].startswith("auto/"):
                print(f"| {k[0]} | {k[1]} | {old[k] * 1e6:.1f} | {new[k] * 1e6:.1f} | {ratios[-1]:.2f} |")
        if ratios:
            print(f"\nmedian of new / old over all {len(ratios)} operations: {statistics.median(ratios):.3f}\n")


if __name__ == "__main__":
    main(sys.argv[1])
