"""How long a GPU machine takes to reach a steady sustained FPS: long series of back-to-back runs of make run's
configs, with every run's FPS and its time, and what the steady rule would have made of them.

    python scripts/steady_series.py OUT [--seconds S] [--config configs/smoke.toml] [--only LABEL ...]

Each series is one untraced process of clusterbench's finder in sustained mode running a fixed plan (no
stop rule: runs of at least 100 ms back to back for about S seconds), as probe runs it, so that the first
runs show the process's and the machine's warm-up. The default order: 3x3_s4 (S s), 3x3_s1_uncontended
(S s), 3x3_s4 again (S / 3 s: a warm process on a warm machine). Writes OUT/series.json (every run: FPS,
seconds, passes, start after the process's first run, and the process's wall-clock start) and prints, per
series: the first run's FPS against the settled level (the median of the last third of the runs); when the
last 5 runs first agreed within 1 % and stayed within 1 % of the settled level ("settled after"); where
the default steady rule (clusterbench.model.steady) would have stopped, its figure and how far that is
from the settled level.

GPU only (CuPy and a GPU). Exit codes: 0 success, 1 a run failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterbench.model.steady import Run, SteadyRule, spread_of, stop_reason  # noqa: E402
from clusterbench.model.stats import median  # noqa: E402

DEFAULT_ORDER = ("3x3_s4", "3x3_s1_uncontended", "3x3_s4")


def plan_runs(seconds: float, pass_s_guess: float) -> int:
    """Runs of about 0.1-0.14 s (two passes of ~55 ms, or one of ~70-135 ms) for ``seconds``."""
    run_s = max(0.1, pass_s_guess)
    return max(10, int(seconds / run_s))


def series(params: dict, runs: int, env: dict, out: Path) -> dict:
    """One process's fixed plan of ``runs`` runs (a first run of one pass, then runs of >= 100 ms)."""
    rule = SteadyRule(counted=runs, min_warmups=0, fixed=True, max_runs=runs + 1)
    env = {**env, "CLUSTERBENCH_STEADY": json.dumps(rule.to_json())}
    result = out.with_suffix(".json")
    cmd = [sys.executable, "-m", "clusterbench.workloads.cupy.run", "--params-json", json.dumps(params),
           "--result", str(result), "--mode", "sustained", "--repeat", str(runs)]
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"exit status {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    doc = json.loads(result.read_text())
    steady = doc["extra"]["steady"]
    return {"process_started_unix": started, "timings_s": doc["extra"].get("timings_s"), "runs": steady["runs"]}


def summarize(label: str, runs: list[dict]) -> dict:
    values = [r["value"] for r in runs]
    starts = [r["started_s"] for r in runs]
    settled = median(values[len(values) * 2 // 3:])
    settled_at = None
    for i in range(4, len(values)):
        window = values[i - 4:i + 1]
        if spread_of(window) <= 0.01 and all(abs(v / settled - 1) <= 0.01 for v in values[i - 4:]):
            settled_at = i - 4
            break
    # the default rule, replayed over the series from its first run
    rule = SteadyRule()
    stop = None
    for n in range(1, len(values) + 1):
        got = [Run(v, r["seconds"], r["passes"], r["started_s"]) for v, r in zip(values[:n], runs[:n])]
        reason = stop_reason(got, starts[n - 1] + (runs[n - 1]["seconds"] or 0.0), rule)
        if reason is not None:
            counted = values[n - rule.counted:n]
            stop = {"runs": n, "reason": reason, "fps": median(counted),
                    "vs_settled": median(counted) / settled - 1, "at_s": starts[n - 1] + runs[n - 1]["seconds"]}
            break
    return {"label": label, "runs": len(values), "span_s": starts[-1] + runs[-1]["seconds"],
            "first_fps": values[0], "first_vs_settled": values[0] / settled - 1, "settled_fps": settled,
            "settled_after_runs": settled_at, "settled_after_s": None if settled_at is None else starts[settled_at],
            "min_fps": min(values), "max_fps": max(values), "default_rule": stop}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/steady_series.py",
                                 description=__doc__.split("\n\n")[0] + " GPU only: needs CuPy and a GPU.")
    ap.add_argument("out", type=Path, help="the folder for series.json and each process's record")
    ap.add_argument("--seconds", type=float, default=12.0, help="seconds of runs per long series (default 12)")
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "smoke.toml")
    ap.add_argument("--only", action="append", help="series labels, in order (default: 3x3_s4, 3x3_s1_uncontended, "
                                                    "3x3_s4 again)")
    args = ap.parse_args(argv)
    import importlib.util
    import shutil

    if importlib.util.find_spec("cupy") is None or shutil.which("nvidia-smi") is None:
        print("Error: steady_series.py needs CuPy and an NVIDIA GPU (CuPy is not importable, or nvidia-smi is "
              "not on PATH)", file=sys.stderr)
        print("Hint: run it on the GPU machine (scripts/device_steady.sh runs it first)", file=sys.stderr)
        return 1
    from clusterbench.errors import ClusterbenchError
    from clusterbench.run.config import load_configs
    from clusterbench.workloads.synth import FRAME_CACHE_ENV, build_frames

    try:
        configs = {c.label: c for c in load_configs(args.config).configs}
    except ClusterbenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    order = tuple(args.only or DEFAULT_ORDER)
    missing = [label for label in order if label not in configs]
    if missing:
        print(f"Error: {args.config} has no config {missing[0]!r}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="clusterbench-frames-"))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           FRAME_CACHE_ENV: str(cache)}
    for label in dict.fromkeys(order):
        build_frames(configs[label].params, cache_dir=cache)
    # a first pass of 8,000 frames: about 55 ms at 3x3 with 4 streams, 70 ms with one (make run, H200)
    guess = {"3x3_s4": 0.11, "3x3_s1_uncontended": 0.14, "9x9_s4": 0.18, "9x9_s1_uncontended": 0.14}
    doc: dict = {"config": str(args.config), "series": []}
    for k, label in enumerate(order):
        seconds = args.seconds if k < 2 else args.seconds / 3
        runs = plan_runs(seconds, guess.get(label, 0.14))
        print(f"series {k + 1}/{len(order)}: {label}, {runs} runs (about {seconds:.0f} s)", file=sys.stderr, flush=True)
        try:
            got = series(configs[label].params.to_json(), runs, env, args.out / f"series{k + 1}_{label}")
        except (RuntimeError, subprocess.SubprocessError, OSError, ValueError, KeyError) as exc:
            print(f"Error: series {label}: {exc}", file=sys.stderr)
            return 1
        got["label"] = label
        got["summary"] = summarize(label, got["runs"])
        doc["series"].append(got)
    (args.out / "series.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'series':<22}{'runs':>5}{'span s':>8}{'first FPS':>11}{'vs settled':>11}{'settled FPS':>12}"
          f"{'settled after':>15}{'rule stops':>17}{'its FPS vs settled':>20}")
    for s in doc["series"]:
        m = s["summary"]
        after = "never" if m["settled_after_s"] is None else f"{m['settled_after_s']:.2f} s (run {m['settled_after_runs'] + 1})"
        rule = m["default_rule"]
        stop = "–" if rule is None else f"run {rule['runs']} ({rule['reason']}, {rule['at_s']:.2f} s)"
        vs = "–" if rule is None else f"{100 * rule['vs_settled']:+.2f} %"
        print(f"{s['label']:<22}{m['runs']:>5}{m['span_s']:>8.1f}{m['first_fps']:>11,.0f}"
              f"{100 * m['first_vs_settled']:>+10.2f}%{m['settled_fps']:>12,.0f}{after:>15}{stop:>17}{vs:>20}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
