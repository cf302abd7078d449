"""The delay test (causal profiling for a GPU pipeline): the program untraced, k µs more per frame on one
resource at a time through the injection library, in P fresh processes per point; how far the frame moved.

Points, each run in every one of the P processes, interleaved (point by point, process by process) so that a
drift of the machine spreads over all of them:

- ``none``: the library, no delay: the baseline of the host's slope, and the untraced frame and host bar;
- ``host`` k: k µs of spin on the launching thread at each frame's marking call;
- ``gpu`` 0 and k: a spin kernel of 0 and k µs in the marking call's stream, ahead of the frame's kernel
  (the 0 µs kernel is the GPU's baseline: adding a kernel costs its launch and latency whatever it runs);
- ``link`` 0 and k: an H2D copy of 4 bytes and of k µs at the link's rate, in the same stream;
- ``bare``: without the library, where the program prints its own rate: the library's own cost.

The slopes come from :func:`clusterbench.analyzers.untraced.fit_slope`. A program whose frames are not
kernel or graph launches has no stream to delay: the GPU and the link are then not tested (the library says
why). Every run's log and report stay in the output folder (``<stem>.delay.<point>.p<k>.log``/``.json``).
Nothing here prints or exits.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from clusterbench.analyzers.untraced import binds_code, fit_slope, host_frame
from clusterbench.errors import ClusterbenchError
from clusterbench.model.stats import median
from clusterbench.model.untraced import DelayRun, DelayTest, HostFrame, InjectReport, cost_frames
from clusterbench.run.inject import inject_env, read_report
from clusterbench.run.supervisor import ChildSpec, run_child

DEFAULT_PROCESSES = 3
MAX_PROCESSES = 20
# The delay is half the untraced frame: large enough to stand out of the noise of a few processes (a
# slope's spread is the frames' spread over k), small enough that a resource with slack keeps it.
K_SHARE = 0.5
K_MIN_US = 2.0
K_MAX_US = 10_000.0
LINK_BASE_BYTES = 4  # the link's baseline copy
NOT_DELAYED = "not delayed: "  # a run's note where the library could not add the delay asked for


@dataclass(frozen=True, slots=True)
class Point:
    """One point of the test: the resource delayed and by how much (µs), or its baseline (k 0)."""

    resource: str  # none, host, gpu, link, bare
    k_us: float = 0.0

    @property
    def name(self) -> str:
        if self.resource in ("none", "bare"):
            return self.resource
        return f"{self.resource}{'' if self.k_us > 0 else '0'}"


@dataclass(frozen=True, slots=True)
class DelayRequest:
    """How to run the program: its command, folder and environment, the frame mark, the warm-up marks,
    P processes per point, the delay (None: K_SHARE of the first baseline's frame), the link's rate that
    turns a delay into bytes (None: the link is not tested), the program's rate line (``rate``, its unit)
    for its own figure and the library's cost, each run's time limit."""

    argv: tuple[str, ...]
    mark: str
    out_dir: Path
    stem: str
    cwd: str | None = None
    base_env: Mapping[str, str] | None = None
    warmup: int = 0
    processes: int = DEFAULT_PROCESSES
    k_us: float | None = None
    link_gbps: float | None = None
    link_rate_from: str = "trace"  # "unit": the unit's measured pinned H2D rate; "trace": the trace's H2D rate
    rate: str | None = None
    rate_unit: str | None = None
    timeout_s: float = 600.0
    domains: str = "runtime,driver"


@dataclass(frozen=True, slots=True)
class DelayOutcome:
    """The test, and the baseline runs' untraced frames and reports (the untraced split's inputs)."""

    test: DelayTest
    baselines: tuple[HostFrame, ...]
    reports: tuple[InjectReport, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


def choose_k(frame_us: float | None, given: float | None) -> float:
    """The delay per frame (µs): the one given, else K_SHARE of the untraced frame (the library's, else the
    program's own figure) within K_MIN_US..K_MAX_US (pure)."""
    if given is not None:
        return float(given)
    if frame_us is None or not frame_us > 0:
        return K_MIN_US * 5
    return float(min(K_MAX_US, max(K_MIN_US, round(K_SHARE * frame_us, 1))))


def link_bytes_for(k_us: float, gbps: float | None) -> int | None:
    """Bytes that take ``k_us`` at ``gbps`` (GB/s = 1e3 bytes per µs) (pure); None without a rate."""
    if gbps is None or not gbps > 0:
        return None
    return max(LINK_BASE_BYTES, int(round(k_us * gbps * 1e3)))


def points(k_us: float, link: bool, bare: bool) -> tuple[Point, ...]:
    """The test's points in the order each process round runs them (pure)."""
    out = [Point("none"), Point("host", k_us), Point("gpu", 0.0), Point("gpu", k_us)]
    if link:
        out += [Point("link", 0.0), Point("link", k_us)]
    if bare:
        out.append(Point("bare"))
    return tuple(out)


def _own_us(output: str, rate: str | None, unit: str | None) -> float | None:
    """The frame (µs) by the program's own rate line, or None."""
    if not rate:
        return None
    from clusterbench.run.rates import read_figure

    try:
        reading = read_figure(output, re.compile(rate), unit)
    except (ValueError, re.error):
        return None
    if reading is None or reading.metric != "fps" or not reading.converted > 0:
        return None
    return 1e6 / reading.converted


def _run_point(req: DelayRequest, lib: Path, point: Point, process: int, link_bytes: int | None
               ) -> tuple[DelayRun, HostFrame | None, InjectReport | None]:
    tag = f"{req.stem}.delay.{point.name}.p{process}"
    report_path = (req.out_dir / f"{tag}.json").resolve()
    report_path.unlink(missing_ok=True)
    env = dict(req.base_env or {})
    if point.resource != "bare":
        env.update(inject_env(lib, report_path, req.mark, warmup=req.warmup, domains=req.domains,
                              host_us=point.k_us if point.resource == "host" else 0.0,
                              gpu_us=point.k_us if point.resource == "gpu" else None,
                              link_bytes=(link_bytes if point.k_us > 0 else LINK_BASE_BYTES) if point.resource == "link"
                              else None))
    outcome = run_child(ChildSpec(tuple(req.argv), req.out_dir / f"{tag}.log",
                                  header=f"delay test: {point.name} (k {point.k_us:g} µs), process {process}",
                                  env=env, cwd=req.cwd, timeout_s=req.timeout_s))
    own = _own_us(outcome.output(), req.rate, req.rate_unit) if outcome.ok else None
    nbytes = (link_bytes if point.k_us > 0 else LINK_BASE_BYTES) if point.resource == "link" else None
    if not outcome.ok:
        return DelayRun(point.resource, point.k_us, process, None, None, nbytes, own, outcome.status_text), None, None
    if point.resource == "bare":
        return DelayRun("bare", 0.0, process, own, None, None, own,
                        None if own is not None else "the program printed no rate to time it by"), None, None
    try:
        report = read_report(report_path)
    except ClusterbenchError as exc:
        return DelayRun(point.resource, point.k_us, process, None, None, nbytes, own, str(exc)), None, None
    frame = host_frame(report)
    note = report.error
    if point.resource in ("gpu", "link") and (report.gpu_applied if point.resource == "gpu" else report.link_applied) == 0:
        note = NOT_DELAYED + (report.not_tested or "no frame could be delayed")
    elif frame is None:
        note = f"no frame period: {report.marks_total} mark(s) of {req.mark}, {req.warmup} of them warm-up"
    return (DelayRun(point.resource, point.k_us, process, None if frame is None else frame.period_us,
                     None if frame is None else frame.host_us, nbytes, own, note), frame, report)


def run_delay_test(req: DelayRequest, lib: Path, on_run: Callable[[str], None] | None = None) -> DelayOutcome:
    """Run every point in every process and fit the slopes. The runs that fail are kept with why; a
    resource none of whose runs could be delayed is not tested."""
    say = on_run or (lambda text: None)
    runs: list[DelayRun] = []
    frames: dict[str, list[HostFrame]] = {}
    reports: list[InjectReport] = []
    say(f"baseline, process 1 of {req.processes}")
    first, frame0, rep0 = _run_point(req, lib, Point("none"), 0, None)
    runs.append(first)
    if frame0 is not None:
        frames.setdefault("none", []).append(frame0)
    if rep0 is not None:
        reports.append(rep0)
    # the delay's scale: the frame by the library's marks, else by the program's own printed figure (a program
    # of one frame a run, asyncAPI's shape, gives no period from its marks)
    k = choose_k(first.frame_us if first.frame_us is not None else first.own_us, req.k_us)
    nbytes = link_bytes_for(k, req.link_gbps)
    plan = points(k, nbytes is not None, req.rate is not None)
    for p in range(req.processes):
        for point in plan:
            if p == 0 and point.resource == "none":
                continue
            say(f"{point.name} (k {k:g} µs), process {p + 1} of {req.processes}")
            run, frame, rep = _run_point(req, lib, point, p, nbytes)
            runs.append(run)
            if frame is not None:
                frames.setdefault(point.name, []).append(frame)
            if rep is not None and point.resource == "none":
                reports.append(rep)
    test = dataclasses.replace(fit(runs, k, req.processes, nbytes, req.link_gbps), link_rate_from=req.link_rate_from)
    notes = tuple(f"{r.resource} k {r.k_us:g} µs process {r.process + 1}: {r.note}" for r in runs if r.note)
    return DelayOutcome(test, tuple(frames.get("none", ())), tuple(reports), notes)


def _frames_of(runs: Sequence[DelayRun], resource: str, delayed: bool, key: str = "frame_us") -> list[float]:
    return [getattr(r, key) for r in runs if r.resource == resource and (r.k_us > 0) == delayed
            and getattr(r, key) is not None
            and not (r.note or "").startswith(NOT_DELAYED)]


def fit(runs: Sequence[DelayRun], k_us: float, processes: int, link_bytes: int | None, link_gbps: float | None
        ) -> DelayTest:
    """The slopes, the verdict and the library's cost from the runs (pure)."""
    slopes = []
    base_of = {"host": ("none", False), "gpu": ("gpu", False), "link": ("link", False)}
    for resource in ("host", "gpu", "link"):
        delayed_runs = [r for r in runs if r.resource == resource and r.k_us > 0]
        why = None
        if resource == "link" and link_bytes is None:
            why = "the trace holds no H2D copy to size the link's delay by (the program moves nothing host-to-device)"
        elif delayed_runs and all((r.note or "").startswith(NOT_DELAYED) for r in delayed_runs):
            why = delayed_runs[0].note[len(NOT_DELAYED):]  # type: ignore[index]
        base_res, _ = base_of[resource]
        base, delayed = _frames_of(runs, base_res, False), _frames_of(runs, resource, True)
        s = fit_slope(resource, k_us, base, delayed, why)
        if s.verdict == "not tested" and why is None:
            # a program of one frame marks no period: its own printed figure is its frame
            own_b, own_d = _frames_of(runs, base_res, False, "own_us"), _frames_of(runs, resource, True, "own_us")
            if own_b and own_d:
                s = fit_slope(resource, k_us, own_b, own_d)
                s = dataclasses.replace(s, note="by the program's own printed figure (its marks give no frame period)"
                                        + (f"; {s.note}" if s.note else ""))
        slopes.append(s)
    own_none, bare = cost_frames(runs)
    bare_us = median(bare) if bare else None
    cost = median(own_none) / bare_us - 1 if bare_us and own_none else None
    return DelayTest(processes, k_us, link_bytes, link_gbps, tuple(runs), tuple(slopes), binds_code(slopes), bare_us, cost)
