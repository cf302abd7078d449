"""What the whole-array path (analyzers.analysis) and the slab path (analyzers.streamed) share: the
request, and the assembly of one group's analysis and of the trace's from the analyzers' records (pure)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from clusterbench.analyzers import frames as frames_mod
from clusterbench.analyzers import gaps as gaps_mod
from clusterbench.analyzers import rules as R
from clusterbench.analyzers import verdict as verdict_mod
from clusterbench.analyzers import window as window_mod
from clusterbench.analyzers.records import GroupAnalysis, Throughput, TraceAnalysis
from clusterbench.io.nsys import schema as S
from clusterbench.model import units as U
from clusterbench.model.engines import BY_NAME

ABSURD_US_PER_FRAME = 0.001  # 1 ns per frame: no pipeline moves or computes a frame that fast


@dataclass(frozen=True, slots=True)
class Request:
    """What to analyze, parsed and checked before anything is read."""

    window: window_mod.WindowSpec
    frames: frames_mod.FramesSpec | None = None
    device: int | None = None
    pid: int | None = None
    by_stream: bool = False
    mangled: bool = False
    what_if: tuple[Any, ...] = ()
    gap_ns: int = gaps_mod.GAP_NS

    def range_prefixes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(window_mod.range_prefixes(self.window) + frames_mod.range_prefixes(self.frames)))


def request(
    frames: int | None = None,
    range_name: str | None = None,
    device: int | None = None,
    pid: int | None = None,
    by_stream: bool = False,
    what_if: tuple[Any, ...] = (),
    window: str | None = None,
    frames_spec: str | None = None,
    mangled: bool = False,
) -> Request:
    """A Request from the options as the CLI and the library take them; InputError when one is malformed."""
    return Request(
        window=window_mod.parse(window, range_name),
        frames=frames_mod.parse(frames_spec, frames),
        device=device, pid=pid, by_stream=by_stream, mangled=mangled, what_if=tuple(what_if),
    )  # fmt: skip


def implausible_warnings(busy, warnings: list[str]) -> None:  # noqa: ANN001
    for name, st in busy.engines.items():
        if st.implausible_count:
            warnings.append(
                f"{name}: {st.implausible_count:,} record(s) of {st.implausible_bytes:,} bytes in total report up to "
                f"{U.gbps(st.implausible_max_gbps)}, above the {U.gbps(st.implausible_limit_gbps)} that no "
                f"{BY_NAME[name].link} reaches: the record's bytes or times are wrong. They are left out of busy time, "
                "bytes, GB/s and the roofline."
            )


def assemble(g, w, frames, busy, roof, gp, host, path, kernels, copies, pacing, pacing_note,  # noqa: ANN001
             warnings: list[str]) -> GroupAnalysis:  # fmt: skip
    """One group's analysis from its analyzers' records (the whole-array path and the slab path share it):
    the throughput, the figures a missing GPU's work would make wrong, the verdict and the rules."""
    n = frames.count
    hidden = gaps_mod.work_not_traced(g, gp, w.length_ns)
    window_ns = w.length_ns
    steady_ns = window_ns - gp.setup_ns
    throughput = Throughput(
        measured_us_per_frame=U.us_per_frame_of(window_ns, n),
        efficiency=(roof.busy_ns / window_ns) if (window_ns > 0 and roof.engine) else None,
        steady_ns=steady_ns,
        steady_idle_ns=busy.idle_ns - gp.setup_ns,
        steady_us_per_frame=U.us_per_frame_of(steady_ns, n),
        steady_efficiency=(roof.busy_ns / steady_ns) if (steady_ns > 0 and roof.engine) else None,
    )
    if hidden is not None:  # the figures the missing work would change cannot be right: leave them out
        roof = dataclasses.replace(roof, us_per_frame=None, fps=None)
        throughput = dataclasses.replace(throughput, efficiency=None, steady_efficiency=None)
    if roof.us_per_frame is not None and roof.us_per_frame < ABSURD_US_PER_FRAME:
        warnings.append(
            f"the result is absurd: {U.duration(roof.us_per_frame * U.NS_PER_US)} per frame for the tallest bar "
            f"({roof.engine}), below the {U.duration(ABSURD_US_PER_FRAME * U.NS_PER_US)} that no GPU pipeline reaches: frames ({n:,}, from "
            f"{frames.source}) is likely wrong; it must count the frames processed inside the window"
        )
    out = GroupAnalysis(
        pid=g.pid, device=g.device, gpu_name=g.gpu_name, window=w, frames=frames, busy=busy, roofline=roof, gaps=gp,
        host=host, throughput=throughput, kernels=kernels, copies=copies, pacing=pacing, pacing_note=pacing_note,
        work_not_traced=hidden, graph_trace=g.graph_trace, critical_path=path,
    )  # fmt: skip
    out = dataclasses.replace(out, binding=verdict_mod.judge(out))
    return dataclasses.replace(out, findings=R.evaluate(out))


def no_kernel_table_warning(tables: frozenset[str]) -> str:
    """What an export without a kernel table means for the figures (one sentence for the user)."""
    if S.GRAPH_TRACE_TABLE in tables:
        return (f"the export has no {S.KERNEL_TABLE} table: every kernel ran inside a CUDA graph traced at graph "
                "level, so the kernel row reads 0 and the graph row holds their time")
    return (f"the export has no {S.KERNEL_TABLE} table: no kernel was traced, so the kernel row reads 0 and the "
            "roofline leaves kernels out (nsys writes the table only when it traced CUDA (-t cuda) and the program "
            "launched a kernel)")


def finish(groups: list[GroupAnalysis], warnings: list[str], graph_trace: str | None, nsys_version: str | None,
           schema_version: str | None, req: Request, label: str, tables: frozenset[str]) -> TraceAnalysis:  # fmt: skip
    """The trace's analysis from its groups' (the whole-array path and the slab path share it); ``tables``
    the export's tables."""
    primary = max(groups, key=lambda g: g.busy.any_busy_ns)
    if len(groups) > 1:
        warnings.insert(
            0,
            f"the trace has {len(groups)} (process, device) groups; the top level reports pid {primary.pid} "
            f"device {primary.device} (most GPU busy time); every group is under 'groups'. "
            "Pick one with --pid/--device.",
        )
    if S.KERNEL_TABLE not in tables:  # the kernel row would read 0 with no word why
        warnings.insert(0, no_kernel_table_warning(tables))
    graph_warning = None
    if graph_trace == "graph" and any("graph" in g.busy.engines for g in groups):
        graph_warning = R.GRAPH_WARNING
        warnings.insert(0, graph_warning)
    wif = None
    if req.what_if:
        from clusterbench.analyzers.whatif import what_if as _what_if

        wif = _what_if(primary, tuple(req.what_if))
    return TraceAnalysis(
        trace=label,
        nsys_version=nsys_version,
        schema_version=schema_version,
        groups=tuple(groups),
        primary=primary,
        warnings=tuple(warnings),
        graph_warning=graph_warning,
        what_if=wif,
    )
