"""The host bar without the profiler: nsys's cost per CUDA call on this machine, and the untraced host bar
estimated from it (or from the program's own traced and untraced rates).

nsys makes every CUDA call slower (CUPTI's callbacks and activity records), so a launching thread's bar in a
trace is taller than the same thread's work without the profiler. A sustained FPS is measured without it:
set against the traced bar, a host-bound program reads above its roofline (153 %). Two ways to the
untraced bar, in the order they are used:

- ``calibrated``: :mod:`clusterbench.workloads.cupy.calls` times three kinds of call (an empty kernel launch,
  a 4-byte async copy, an event record) untraced and under nsys; the difference per kind is nsys's cost per
  call, with a spread from the chunks' ranges (run again, up to 3 times, while a spread is as large as its
  cost). The untraced bar is the traced bar less, per kind, the thread's calls per frame times that cost. It
  is measured once per machine (host, GPU, driver, nsys version) and kept in a cache file
  (:func:`cache_path`) once it has settled.
- ``rate-scaled``: where no calibration can run (no CuPy for the calibration, or it failed), a host-bound
  program's own untraced and traced rates: its bar shrinks by the factor its rate grew (the profiler
  overhead). Only a program whose host binds shows its host's slow-down in its rate, so this is used only
  there, and says so.

Nothing here prints, exits or imports CuPy; the calibration runs as two child processes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from clusterbench.errors import EnvironmentFailure
from clusterbench.model import units
from clusterbench.model.stats import half_range, median

KINDS = ("launch", "copy", "event")
CALLS_MODULE = "clusterbench.workloads.cupy.calls"
CACHE_ENV = "CLUSTERBENCH_CACHE_DIR"
CACHE_NAME = "nsys-call-cost.json"
COST_SCHEMA = "clusterbench.nsys-call-cost"
COST_VERSION = 1
# Each child: Python, CuPy and the calls take about 1 s untraced; nsys adds its own start and finish.
CALIBRATION_TIMEOUT_S = 120.0
# A calibration settles when every kind's cost exceeds its spread. On a freshly started H200 machine the first
# one did not (launch 0.92 µs ± 1.36: one slow chunk widens the range); it is run again, up to this many times
# in all, and the least noisy kept. One that never settles is used with its band, and not cached.
CALIBRATION_ATTEMPTS = 3
# A thread's call kinds (analyze's ThreadStats) and the calibrated kind whose cost each pays: launches,
# copies and memsets issued, and the rest (events, queries, stream calls; a wait's entry) as an event record.
KIND_OF_CALLS = {"launch_calls": "launch", "copy_calls": "copy", "other_calls": "event", "wait_calls": "event"}

METHODS = ("calibrated", "rate-scaled", "measured")  # measured: probe --what-binds (clusterbench.run.whatbinds)


@dataclass(frozen=True, slots=True)
class CallCost:
    """nsys's added cost per CUDA call on one machine: per kind, µs per call (``cost_us``) and how far to
    trust it (``spread_us``: half the range of the traced chunks plus half that of the untraced ones), with
    the untraced and traced figures behind it and where it was measured (``machine``)."""

    cost_us: Mapping[str, float]
    spread_us: Mapping[str, float]
    untraced_us: Mapping[str, float]
    traced_us: Mapping[str, float]
    calls: int
    machine: Mapping[str, str | None] = field(default_factory=dict)
    measured_utc: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"schema": COST_SCHEMA, "version": COST_VERSION, "cost_us": dict(self.cost_us),
                "spread_us": dict(self.spread_us), "untraced_us": dict(self.untraced_us),
                "traced_us": dict(self.traced_us), "calls": self.calls, "machine": dict(self.machine),
                "measured_utc": self.measured_utc}

    @classmethod
    def from_json(cls, doc: object) -> "CallCost":
        """ValueError names what is wrong."""
        if not isinstance(doc, Mapping) or doc.get("schema") != COST_SCHEMA or doc.get("version") != COST_VERSION:
            raise ValueError(f"not a version-{COST_VERSION} {COST_SCHEMA} record")
        maps = {}
        for name in ("cost_us", "spread_us", "untraced_us", "traced_us"):
            m = doc.get(name)
            if not isinstance(m, Mapping) or set(m) != set(KINDS) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in m.values()):
                raise ValueError(f"{name} must map {', '.join(KINDS)} to numbers")
            maps[name] = {k: float(v) for k, v in m.items()}
        machine = doc.get("machine") or {}
        if not isinstance(machine, Mapping):
            raise ValueError("machine must be an object")
        calls = doc.get("calls")
        if type(calls) is not int or calls < 1:
            raise ValueError("calls must be an integer >= 1")
        return cls(**maps, calls=calls, machine=dict(machine), measured_utc=doc.get("measured_utc"))  # type: ignore[arg-type]

    def summary(self) -> str:
        """One line: the cost per kind with its spread."""
        return "; ".join(f"{k} {units.us(self.cost_us[k], 2)} ± {units.us(self.spread_us[k], 2, unit=False)}"
                         for k in KINDS) + " per call"

    @property
    def settled(self) -> bool:
        """Every kind's cost above its spread: the profiler's cost stands out of the chunks' noise."""
        return all(self.cost_us[k] > self.spread_us[k] for k in KINDS)

    def noise(self) -> float:
        """The worst kind's spread over its cost (inf where a cost is not above 0): below 1 when settled."""
        return max(self.spread_us[k] / self.cost_us[k] if self.cost_us[k] > 0 else float("inf") for k in KINDS)


def cost_from_chunks(untraced: Mapping[str, Any], traced: Mapping[str, Any], machine: Mapping[str, str | None],
                     measured_utc: str | None = None) -> CallCost:
    """The cost per call from the two records of :mod:`clusterbench.workloads.cupy.calls` (pure): per kind,
    the median traced chunk less the median untraced chunk; spread, half the range of each added. ValueError
    when a record is malformed."""
    u, t = _chunks(untraced), _chunks(traced)
    cost = {k: median(t[k]) - median(u[k]) for k in KINDS}
    spread = {k: half_range(t[k]) + half_range(u[k]) for k in KINDS}
    return CallCost(cost, spread, {k: median(u[k]) for k in KINDS}, {k: median(t[k]) for k in KINDS},
                    int(untraced.get("calls") or 0) or 1, dict(machine), measured_utc)


def _chunks(doc: Mapping[str, Any]) -> dict[str, tuple[float, ...]]:
    per = doc.get("us_per_call") if isinstance(doc, Mapping) else None
    if not isinstance(per, Mapping):
        raise ValueError("a call-cost record needs us_per_call")
    out = {}
    for k in KINDS:
        v = per.get(k)
        if not isinstance(v, list) or not v or not all(isinstance(x, (int, float)) and x > 0 for x in v):
            raise ValueError(f"a call-cost record's us_per_call.{k} must be a list of numbers > 0")
        out[k] = tuple(float(x) for x in v)
    return out


# --------------------------------------------------------------------------- the cache and the calibration


def cache_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$CLUSTERBENCH_CACHE_DIR/nsys-call-cost.json``, else ``$XDG_CACHE_HOME/clusterbench/...``, else
    ``~/.cache/clusterbench/...``."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]) / CACHE_NAME
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "clusterbench" / CACHE_NAME


def machine_key(gpu_uuid: str | None, driver: str | None, nsys_version: str | None,
                host: str | None = None) -> dict[str, str | None]:
    """What a calibration holds for: this host, GPU, driver and nsys version."""
    return {"host": host or socket.gethostname(), "gpu_uuid": gpu_uuid, "driver": driver, "nsys": nsys_version}


def cached(key: Mapping[str, str | None], path: Path | None = None) -> CallCost | None:
    """The calibration cached for ``key``; None when there is none, or the file cannot be read."""
    p = path or cache_path()
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    for entry in doc.get("entries", []) if isinstance(doc, Mapping) else []:
        try:
            cost = CallCost.from_json(entry)
        except ValueError:
            continue
        if dict(cost.machine) == dict(key):
            return cost
    return None


def save(cost: CallCost, path: Path | None = None) -> Path | None:
    """Keep ``cost`` in the cache (replacing its machine's entry); the path, or None where it cannot be
    written (a read-only home: the calibration then runs again next time)."""
    p = path or cache_path()
    try:
        doc = json.loads(p.read_text()) if p.is_file() else {}
    except (OSError, ValueError):
        doc = {}
    entries = [e for e in (doc.get("entries") or [] if isinstance(doc, Mapping) else [])
               if isinstance(e, Mapping) and e.get("machine") != dict(cost.machine)]
    entries.append(cost.to_json())
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"entries": entries}, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, p)
    except OSError:
        return None
    return p


def calibration_commands(nsys: Path | str, out_base: Path, python: str | None = None
                         ) -> tuple[list[str], list[str]]:
    """The untraced and the traced command of the calibration (pure): the calls module, and the same under
    nsys with the probe's own tracing options (no export: only the program's own timers are read)."""
    from clusterbench.run.commands import nsys_profile_command

    child = [python or sys.executable, "-m", CALLS_MODULE]
    traced = nsys_profile_command(nsys, out_base, child, "node")
    return child, traced


def calibrate(nsys: Path | str, key: Mapping[str, str | None], env: Mapping[str, str] | None = None,
              timeout_s: float = CALIBRATION_TIMEOUT_S, attempts: int = CALIBRATION_ATTEMPTS) -> CallCost:
    """Run the calibration (two children: untraced, then under nsys) on the GPU this process's children may
    use, again while it has not settled (:attr:`CallCost.settled`), ``attempts`` times in all; the first that
    settles, else the least noisy. EnvironmentFailure (exit 1) when a child fails, with its output's last
    lines."""
    best: CallCost | None = None
    for _ in range(max(1, attempts)):
        cost = _calibrate_once(nsys, key, env, timeout_s)
        if cost.settled:
            return cost
        if best is None or cost.noise() < best.noise():
            best = cost
    assert best is not None
    return best


def _calibrate_once(nsys: Path | str, key: Mapping[str, str | None], env: Mapping[str, str] | None,
                    timeout_s: float) -> CallCost:
    import datetime

    from clusterbench.run.commands import child_env

    environ = dict(child_env() if env is None else env)
    with tempfile.TemporaryDirectory(prefix="clusterbench-calls-") as tmp:
        untraced_cmd, traced_cmd = calibration_commands(nsys, Path(tmp) / "calls")
        docs = []
        for what, cmd in (("untraced", untraced_cmd), ("under nsys", traced_cmd)):
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=environ)
            except (OSError, subprocess.SubprocessError) as exc:
                raise EnvironmentFailure(f"the nsys call-cost calibration ({what}) did not run: {exc}",
                                         hint="check that CuPy and nsys run here") from None
            out = res.stdout[res.stdout.find("{"):res.stdout.rfind("}") + 1] if "{" in res.stdout else ""
            try:
                if res.returncode != 0:
                    raise ValueError(f"exit status {res.returncode}")
                docs.append(json.loads(out))
            except ValueError as exc:
                tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-8:])
                raise EnvironmentFailure(f"the nsys call-cost calibration ({what}) failed ({exc}):\n{tail}",
                                         hint="check that CuPy and nsys run here") from None
    try:
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        return cost_from_chunks(docs[0], docs[1], key, now)
    except ValueError as exc:
        raise EnvironmentFailure(f"the nsys call-cost calibration gave a malformed record: {exc}") from None


# --------------------------------------------------------------------------- the estimate


@dataclass(frozen=True, slots=True)
class HostEstimate:
    """The busiest launching thread's bar per frame as traced (``traced_us``) and without the profiler
    (``untraced_us``, with ``low_us``..``high_us`` its band from the calibration's spread), how it was made
    (``method``: calibrated, rate-scaled), the thread's calls per frame by calibrated kind, and a sentence on
    how far to trust it."""

    traced_us: float
    untraced_us: float
    low_us: float
    high_us: float
    method: str
    calls_per_frame: Mapping[str, float]
    note: str

    def to_json(self) -> dict[str, object]:
        return {"traced_us": self.traced_us, "untraced_us": self.untraced_us, "low_us": self.low_us,
                "high_us": self.high_us, "method": self.method, "calls_per_frame": dict(self.calls_per_frame),
                "note": self.note}


def calls_per_frame(thread: Any, frames: int) -> dict[str, float]:
    """A thread's CUDA calls per frame by calibrated kind (``thread``: analyze's ThreadStats) (pure)."""
    out = {k: 0.0 for k in KINDS}
    for attr, kind in KIND_OF_CALLS.items():
        out[kind] += float(getattr(thread, attr, 0) or 0) / frames
    return out


def estimate_calibrated(traced_us: float, per_frame: Mapping[str, float], cost: CallCost) -> HostEstimate | None:
    """The bar less each kind's calls per frame times nsys's cost per call (pure); None when the calibration
    says the profiler cost more than the whole bar (it cannot be right: the program's calls are not like the
    calibration's)."""
    removed = sum(per_frame.get(k, 0.0) * cost.cost_us[k] for k in KINDS)
    band = sum(per_frame.get(k, 0.0) * cost.spread_us[k] for k in KINDS)
    untraced = traced_us - removed
    if not untraced > 0:
        return None
    calls = sum(per_frame.values())
    note = (f"calibrated: {units.count(calls) if calls >= 100 else f'{calls:.1f}'} CUDA calls per frame at "
            f"{cost.summary()} of nsys's cost (this machine's calibration, {cost.calls:,} calls of each kind): "
            f"{units.us_per_frame(removed)} less, ± {units.us_per_frame(band)}")
    if not cost.settled:
        note += ("; the calibration did not settle (a spread as large as a cost, in each of its attempts: a busy "
                 "or freshly started machine), so it is not cached and the next probe calibrates again")
    return HostEstimate(traced_us, untraced, max(untraced - band, 1e-9), untraced + band, "calibrated",
                        dict(per_frame), note)


def estimate_rate_scaled(traced_us: float, profiler_overhead: float, spread: float = 0.0) -> HostEstimate | None:
    """The bar shrunk by the program's own untraced / traced rate (``profiler_overhead`` > 0; ``spread``: the
    relative spread of the untraced rate) (pure). Only a host-bound program shows its host's slow-down in its
    rate: the caller uses this only where the host binds."""
    if not profiler_overhead > 0:
        return None
    untraced = traced_us / profiler_overhead
    band = untraced * spread
    note = (f"rate-scaled: the traced bar over the program's own untraced / traced rate ({units.times(profiler_overhead)}"
            f"); it holds where the host binds the rate, ± {units.pct(spread)} (the untraced runs' spread)")
    return HostEstimate(traced_us, untraced, max(untraced - band, 1e-9), untraced + band, "rate-scaled", {}, note)


class CallCosts:
    """One probe's source of nsys's cost per call: the cached calibration of this machine, else one
    calibration run when a config needs it (its host binds), at most once per probe. ``problem``: why a
    calibration that was needed could not be had (said once)."""

    def __init__(self, nsys: Path | str | None, key: Mapping[str, str | None], env: Mapping[str, str],
                 can_calibrate: bool, path: Path | None = None) -> None:
        self.nsys, self.key, self.env, self.can_calibrate, self.path = nsys, dict(key), dict(env), can_calibrate, path
        self._cost: CallCost | None = None
        self._tried = False
        self.problem: str | None = None
        self.measured_now = False

    def get(self, need: bool, on_phase: Any = None) -> CallCost | None:
        """The cost: cached, or calibrated now when ``need`` (and possible); None otherwise."""
        if self._cost is not None or self.nsys is None:
            return self._cost
        self._cost = cached(self.key, self.path)
        if self._cost is not None or not need or self._tried:
            return self._cost
        self._tried = True
        if not self.can_calibrate:
            self.problem = ("nsys's cost per call is not calibrated on this machine, and the calibration needs CuPy "
                            "in the interpreter that runs clusterbench")
            return None
        if on_phase is not None:
            on_phase()
        try:
            self._cost = calibrate(self.nsys, self.key, self.env)
        except EnvironmentFailure as exc:
            self.problem = f"nsys's cost per call could not be calibrated: {str(exc).splitlines()[0]}"
            return None
        self.measured_now = True
        if self._cost.settled:  # a noisy one serves this probe only
            save(self._cost, self.path)
        return self._cost
