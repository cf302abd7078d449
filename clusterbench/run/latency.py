"""The unit's untraced costs: the latency program (``native/cb_latency.cu``) run untraced and under nsys on
the frame's own op sequence with the program's schedule flag, and the CPU frequency governor.

The latency program writes its own JSON (:class:`clusterbench.model.untraced.LatencyRun` reads its
medians); under nsys it runs the same way (no export: only its own clocks are read), so that the
difference is what the profiler adds to the GPU's latency between dependent ops and to the round trip.
Nothing here prints or exits.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Mapping, Sequence

from clusterbench.errors import EnvironmentFailure
from clusterbench.model.untraced import LatencyRun, UntracedCosts
from clusterbench.run.commands import nsys_profile_command
from clusterbench.run.supervisor import ChildSpec, require_ok, run_child

SCHEDS = ("auto", "spin", "yield", "blocking")
LATENCY_TIMEOUT_S = 120.0
GOVERNOR_GLOB = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"


def latency_command(binary: Path, out: Path, seq: str, sched: str | None, reps: int = 100, batches: int = 7,
                    round_trips: int = 300) -> list[str]:
    """The latency program's command line (pure); ``sched`` None runs with the driver's default (auto)."""
    if sched is not None and sched not in SCHEDS:
        raise ValueError(f"sched must be one of {', '.join(SCHEDS)}, got {sched!r}")
    cmd = [str(binary), "--out", str(out), "--reps", str(reps), "--batches", str(batches),
           "--round-trips", str(round_trips), "--sched", sched or "auto"]
    if seq:
        cmd += ["--seq", seq]
    return cmd


def read_latency(path: Path, under: str) -> LatencyRun:
    """The latency program's report; EnvironmentFailure when it is missing or malformed (the program ran)."""
    try:
        return LatencyRun.from_report(json.loads(Path(path).read_text()), under)
    except (OSError, ValueError) as exc:
        raise EnvironmentFailure(f"the latency program's report {path} cannot be read: {exc}",
                                 hint="read its log beside the report") from None


def run_latency(binary: Path, seq: str, sched: str | None, out_dir: Path, stem: str, *, nsys: Path | None = None,
                env: Mapping[str, str] | None = None,
                timeout_s: float = LATENCY_TIMEOUT_S) -> tuple[LatencyRun, LatencyRun | None]:
    """The latency program untraced, then (with ``nsys``) under nsys with the probe's tracing options: its
    two runs. Files ``<stem>.latency.json`` / ``.log`` and ``<stem>.latency-nsys.*`` in ``out_dir``.
    EnvironmentFailure when a run fails."""
    runs: list[LatencyRun | None] = []
    for under in ("none", "nsys") if nsys is not None else ("none",):
        tag = "latency" if under == "none" else "latency-nsys"
        out = (out_dir / f"{stem}.{tag}.json").resolve()
        out.unlink(missing_ok=True)
        cmd = latency_command(binary, out, seq, sched)
        if under == "nsys":
            cmd = nsys_profile_command(nsys, (out_dir / f"{stem}.{tag}").resolve(), cmd, "node")  # type: ignore[arg-type]
        outcome = run_child(ChildSpec(tuple(cmd), out_dir / f"{stem}.{tag}.log", header=f"latency program ({under})",
                                      env=dict(env) if env is not None else None, timeout_s=timeout_s))
        require_ok(outcome, f"the latency program ({'untraced' if under == 'none' else 'under nsys'})")
        runs.append(read_latency(out, under))
        for rep in (out_dir / f"{stem}.{tag}.nsys-rep",):
            rep.unlink(missing_ok=True)  # only the program's own clocks are read
    assert runs[0] is not None
    return runs[0], runs[1] if len(runs) > 1 else None


def read_governors(pattern: str = GOVERNOR_GLOB) -> list[str]:
    """Every CPU's frequency governor (empty where cpufreq is not exposed)."""
    out = []
    for p in sorted(glob.glob(pattern)):
        try:
            out.append(Path(p).read_text().strip())
        except OSError:
            continue
    return out


def unit_costs(untraced: LatencyRun, traced: LatencyRun | None, sched: str | None, governors: Sequence[str],
               call_us: Mapping[str, float]) -> UntracedCosts:
    """The unit's record (pure)."""
    from clusterbench.analyzers.untraced import governor_of

    return UntracedCosts(untraced, traced, sched, governor_of(governors), dict(call_us))
