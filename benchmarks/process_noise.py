"""How often compare's process rule calls an A/A pair a change, and how often it sees a 5 % change.

    python3 benchmarks/process_noise.py [--draws 100000] [--json out.json]

compare judges sustained FPS measured in P processes a side (one GPU unit) by: a change of the medians of the
process medians must exceed max(the minimum effect, K x the larger side's range of process medians over its
median) (compare/compare.py, PROCESS_SPREAD_FACTOR = K). With 2 or 3 processes a side a rank test cannot reach
significance (Mann-Whitney's smallest two-sided p is 0.33 at 2 against 2), so the rule is a bound; this script
says what it buys:

1. The process-to-process noise of one unit, from the committed A/A dirs of freshly started H200 machines
   (results/2026-12-02_f32_aa_m*: each dir's sustained FPS of a config is one fresh process's median; dirs of
   one GPU unit are processes of that unit): per stream class, the pooled standard deviation of log(figure /
   its unit's mean), over the steady rows of units with two dirs or more.
2. A/A false positives and the power at a 5 % change (after = before / 1.05, FPS) by simulation (seeded):
   process medians drawn (a) lognormal with the pooled sigma, (b) resampled from the pooled residuals
   themselves, for P = 2, 3, 5 and K = 1, 1.5, 2, with the default minimum effect (1 %) and without it (0 %,
   the rule's own spread term alone).
3. A check that the vectorised rule here decides as compare_metric does, on the first draws.

CPU only, a few seconds. docs/compare.md ("The noise of two probes") quotes its output.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterbench.compare.compare import PROCESS_SPREAD_FACTOR, Verdict, compare_metric  # noqa: E402
from clusterbench.compare.noise import DEFAULT_MIN_EFFECT_PCT  # noqa: E402
from clusterbench.io.results import load_results  # noqa: E402
from clusterbench.model.processes import ProcessSpread  # noqa: E402

SEED = 20_261_203
CHANGE = 0.05  # the change whose power is asked for: 5 % fewer FPS


def process_residuals(root: Path) -> tuple[dict[str, list[float]], dict[str, int]]:
    """log(figure / unit mean) of every steady sustained figure of units with two fresh-machine A/A dirs or more,
    per stream class ("1" or "several"), and how many (unit, config) groups they come from."""
    by: dict[tuple[str, str], list[float]] = {}
    streams: dict[str, int] = {}
    for d in sorted(root.glob("2026-12-02_f32_aa_m*")):
        res = load_results(d)
        uuid = res.env.gpu_uuid if res.env is not None else None
        for r in res.rows:
            if r.sustained_fps is None or r.sustained_steady is not True or not uuid:
                continue
            by.setdefault((uuid, r.label), []).append(r.sustained_fps)
            streams[r.label] = r.streams
    out: dict[str, list[float]] = {"1": [], "several": []}
    groups = {"1": 0, "several": 0}
    for (_, label), values in by.items():
        if len(values) < 2:
            continue
        mean = float(np.mean(np.log(values)))
        cls = "1" if streams[label] == 1 else "several"
        out[cls].extend(math.log(v) - mean for v in values)
        groups[cls] += 1
    return out, groups


def pooled_sigma(residuals: list[float], groups: int) -> float:
    return math.sqrt(sum(r * r for r in residuals) / max(len(residuals) - groups, 1))


def rule_moves(before: np.ndarray, after: np.ndarray, k: float, min_effect: float) -> np.ndarray:
    """Whether the process rule calls each pair (rows: draws, columns: processes) a change (vectorised)."""
    mb, ma = np.median(before, axis=1), np.median(after, axis=1)
    sb = np.ptp(before, axis=1) / mb
    sa = np.ptp(after, axis=1) / ma
    noise = np.maximum(min_effect, k * np.maximum(sb, sa))
    return np.abs(ma / mb - 1.0) > noise + 1e-9


def check_against_compare(before: np.ndarray, after: np.ndarray, k: float, min_effect_pct: float) -> int:
    """Draws where compare_metric decides as :func:`rule_moves` does (the first rows)."""
    moves = rule_moves(before, after, k, min_effect_pct / 100)
    agree = 0
    for b, a, mv in zip(before, after, moves):
        def spread(x: np.ndarray) -> ProcessSpread:
            med = float(np.median(x))
            return ProcessSpread(len(x), med, float(np.ptp(x) / med), 0.0, 0)

        m = compare_metric("sustained_fps", float(np.median(b)), float(np.median(a)), streams=1,
                           processes_before=spread(b), processes_after=spread(a), scope="same_unit",
                           min_effect_pct=min_effect_pct)
        agree += (m.verdict is not Verdict.SAME) == bool(mv)
    return agree


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=100_000, help="simulated pairs per cell (default 100,000)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(SEED)
    residuals, groups = process_residuals(ROOT / "results")
    report: dict = {"seed": SEED, "draws": args.draws, "k_used": PROCESS_SPREAD_FACTOR,
                    "min_effect_pct": DEFAULT_MIN_EFFECT_PCT, "classes": {}}
    print("process-to-process noise of one unit (committed fresh-machine H200 A/A dirs, steady rows):")
    for cls, res in residuals.items():
        sigma = pooled_sigma(res, groups[cls])
        report["classes"][cls] = {"residuals": len(res), "sigma_pct": 100 * sigma, "cells": []}
        print(f"  {cls} stream(s): {len(res)} process figures of {groups[cls]} (unit, config) groups, pooled sigma "
              f"{100 * sigma:.3f} %")
    print()
    print(f"{'streams':8} {'draw':10} {'P':>2} {'K':>4} {'min effect':>10} {'A/A moves':>10} {'5 % seen':>9}")
    for cls, res in residuals.items():
        sigma = report["classes"][cls]["sigma_pct"] / 100
        pool = np.array(res)
        for draw in ("lognormal", "resampled"):
            for p in (2, 3, 5):
                for k in (1.0, 1.5, 2.0):
                    for me in (DEFAULT_MIN_EFFECT_PCT, 0.0):
                        def sample(n: int) -> np.ndarray:
                            if draw == "lognormal":
                                return np.exp(rng.normal(0.0, sigma, size=(n, p)))
                            return np.exp(rng.choice(pool, size=(n, p)))

                        b, a = sample(args.draws), sample(args.draws)
                        fp = float(np.mean(rule_moves(b, a, k, me / 100)))
                        slow = sample(args.draws) / (1 + CHANGE)
                        power = float(np.mean(rule_moves(b, slow, k, me / 100) & (np.median(slow, 1) < np.median(b, 1))))
                        report["classes"][cls]["cells"].append({"draw": draw, "P": p, "K": k, "min_effect_pct": me,
                                                                "aa_false_positive": fp, "power_5pct": power})
                        mark = " <- the default" if (p, k, me, draw) == (3, PROCESS_SPREAD_FACTOR,
                                                                         DEFAULT_MIN_EFFECT_PCT, "lognormal") else ""
                        print(f"{cls:8} {draw:10} {p:>2} {k:>4g} {me:>8g} % {100 * fp:>8.2f} % {100 * power:>7.1f} %"
                              f"{mark}")
    # a noisier machine: the default rule (P = 3, K, the minimum effect) at larger process noise
    print(f"\nthe default rule (P = 3, K = {PROCESS_SPREAD_FACTOR:g}, minimum effect {DEFAULT_MIN_EFFECT_PCT:g} %) "
          "at larger process noise (lognormal):")
    print(f"{'sigma':>7} {'A/A moves':>10} {'5 % seen':>9} {'20 % seen':>10}")
    report["sigma_sweep"] = []
    for sig in (0.005, 0.01, 0.02, 0.03):
        b, a = (np.exp(rng.normal(0.0, sig, size=(args.draws, 3))) for _ in range(2))
        fp = float(np.mean(rule_moves(b, a, PROCESS_SPREAD_FACTOR, DEFAULT_MIN_EFFECT_PCT / 100)))
        seen = []
        for change in (CHANGE, 0.20):
            slow = np.exp(rng.normal(0.0, sig, size=(args.draws, 3))) / (1 + change)
            seen.append(float(np.mean(rule_moves(b, slow, PROCESS_SPREAD_FACTOR, DEFAULT_MIN_EFFECT_PCT / 100)
                                       & (np.median(slow, 1) < np.median(b, 1)))))
        report["sigma_sweep"].append({"sigma_pct": 100 * sig, "aa_false_positive": fp, "power_5pct": seen[0],
                                      "power_20pct": seen[1]})
        print(f"{100 * sig:>5.1f} % {100 * fp:>8.2f} % {100 * seen[0]:>7.1f} % {100 * seen[1]:>8.1f} %")
    # the vectorised rule decides as compare does
    sigma = report["classes"]["several"]["sigma_pct"] / 100
    b = np.exp(rng.normal(0.0, max(sigma, 0.004), size=(300, 3)))
    a = np.exp(rng.normal(-0.01, max(sigma, 0.004), size=(300, 3)))
    agree = check_against_compare(b, a, PROCESS_SPREAD_FACTOR, DEFAULT_MIN_EFFECT_PCT)
    report["compare_agrees"] = f"{agree} of 300"
    print(f"\ncompare_metric decides as this script's rule on {agree} of 300 drawn pairs")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if agree == 300 else 3


if __name__ == "__main__":
    sys.exit(main())
