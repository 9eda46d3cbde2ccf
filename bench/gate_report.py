#!/usr/bin/env python3
"""The benchmark gate's table (bench/gate runs the benchmarks; this reads their JSON).

Files in OUT: SCENARIO.rR.{a,x,b}.json, where a and b are the reference's two runs of round R and
x is this tree's. Per figure: ratio = median over rounds of x / mean(a, b); band = the largest
|ln(a / b)| over the rounds (the reference against itself), at least MIN_BAND. A figure whose
ratio is worse than e^band is a regression. Exit 1 on any regression or failed check, else 0.
"""
import argparse
import json
import math
import statistics
import sys
from pathlib import Path

MIN_BAND = 0.02  # 2 %: counts that do not vary still get a band (rounding, one-off events)

# scenario -> [(figure, direction)]: "lower" or "higher" is better; "info" is shown, never gated.
FIGURES = {
    "handoff": [("handoff_ms_p50", "lower"), ("handoff_ms_p99", "lower")],
    # excess_ms_* (from the kill) is not gated: it is negative whenever the kill lands between
    # renewals, so a ratio says nothing; the excess from the victim's last renewal is the figure.
    "failover": [("excess_from_renewal_ms_p50", "lower"), ("excess_from_renewal_ms_max", "lower")],
    "store-cost": [("worst_writes_over_heartbeat_ratio", "lower"),
                   ("worst_worker_watch_events_per_s_p50", "lower")],
    "scale-out": [("balanced_s", "lower"), ("last_move_claimed_s", "lower"),
                  ("moves_over_minimum", "lower"), ("cpu_utilisation", "info")],
    "cold-start": [("filled_and_seeded_s", "lower"), ("seeding_creates_per_s", "higher"),
                   ("rss_peak_mib", "lower")],
}
MAX_MOVES_OVER_MINIMUM = 1.01


def load(path):
    """The first JSON document in the file (a benchmark may print a text table after it)."""
    try:
        return json.JSONDecoder().raw_decode(path.read_text().lstrip())[0]
    except (OSError, ValueError):
        return None


def fleet_figures(doc):
    """Headline figures of a fleet_bench --json document (its median), plus derived ones."""
    if not doc or "median" not in doc:
        return {}
    figs = {k: v for k, v in doc["median"].items() if isinstance(v, (int, float))}
    runs = doc.get("runs") or [{}]
    detail = runs[0].get("detail", {})
    if figs.get("minimum_moves"):
        figs["moves_over_minimum"] = figs["moves"] / figs["minimum_moves"]
    for name in ("cpu_utilisation", "newcomer_revocations"):
        if isinstance(detail.get(name), (int, float)):
            figs[name] = detail[name]
    return figs


def assignment_figures(doc):
    """CPU ms per computation of every assignment/... case of a Google Benchmark JSON."""
    if not doc:
        return {}
    return {b["name"].removeprefix("assignment/").split("/min_time")[0] + " cpu_ms": b["cpu_time"]
            for b in doc.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"}


def finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def compare(rounds, name, direction):
    """(ratio, band, verdict) for one figure over the rounds' (a, x, b) figure dicts."""
    ratios, spreads = [], []
    for a, x, b in rounds:
        va, vx, vb = a.get(name), x.get(name), b.get(name)
        if finite(va) and finite(vb):
            spreads.append(abs(math.log(va / vb)))
            if finite(vx):
                ratios.append(vx / ((va + vb) / 2))
    if not ratios:
        return None, None, "missing"
    ratio = statistics.median(ratios)
    band = max([MIN_BAND] + spreads)
    if direction == "info":
        return ratio, band, "-"
    worse = ratio > math.exp(band) if direction == "lower" else ratio < math.exp(-band)
    better = ratio < math.exp(-band) if direction == "lower" else ratio > math.exp(band)
    return ratio, band, "WORSE" if worse else ("better" if better else "same")


def fmt(v, digits=3):
    return "-" if v is None or not math.isfinite(v) else f"{v:.{digits}g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", required=True)
    ap.add_argument("--cand", required=True)
    ap.add_argument("out", type=Path)
    args = ap.parse_args()

    scenarios = sorted({p.name.split(".r")[0] for p in args.out.glob("*.r*.json")})
    failures, lines = [], []
    lines.append(f"| figure | {args.ref} (median) | {args.cand} (median) | ratio | noise band | verdict |")
    lines.append("|---|---|---|---|---|---|")
    for scenario in scenarios:
        n = 1 + max(int(p.name.split(".r")[1].split(".")[0])
                    for p in args.out.glob(f"{scenario}.r*.json"))
        read = assignment_figures if scenario == "assignment" else fleet_figures
        rounds = [tuple(read(load(args.out / f"{scenario}.r{r}.{w}.json")) for w in "axb")
                  for r in range(1, n)]
        figures = FIGURES.get(scenario)
        if figures is None:  # the assignment bench: every case it ran, CPU time lower is better
            names = sorted({k for rnd in rounds for d in rnd for k in d})
            figures = [(k, "lower") for k in names]
        for name, direction in figures:
            ratio, band, verdict = compare(rounds, name, direction)
            ref_vals = [d.get(name) for a, _, b in rounds for d in (a, b) if finite(d.get(name))]
            cand_vals = [x.get(name) for _, x, _ in rounds if finite(x.get(name))]
            med = lambda vs: statistics.median(vs) if vs else None
            band_txt = "-" if band is None else f"±{100 * (math.exp(band) - 1):.1f} %"
            lines.append(f"| {scenario}: {name} | {fmt(med(ref_vals))} | {fmt(med(cand_vals))} "
                         f"| {fmt(ratio)} | {band_txt} | {verdict} |")
            if verdict in ("WORSE", "missing") and direction != "info":
                failures.append(f"{scenario}: {name} {verdict.lower()}")
        if scenario == "scale-out":
            for r, (_, x, _) in enumerate(rounds, 1):
                over = x.get("moves_over_minimum")
                if not finite(over) or over > MAX_MOVES_OVER_MINIMUM:
                    failures.append(f"scale-out round {r}: moves / minimum {fmt(over, 4)} "
                                    f"(at most {MAX_MOVES_OVER_MINIMUM})")
                if x.get("newcomer_revocations", 0) > 0:
                    failures.append(f"scale-out round {r}: {x['newcomer_revocations']:.0f} "
                                    "newcomer revocations (splits moved twice)")
    print("\n".join(lines))
    print()
    if failures:
        print("gate: FAILED\n  " + "\n  ".join(failures))
        return 1
    print("gate: passed (no figure worse than its noise band)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
