"""The engine table: every GPU engine a trace can show, with its display name, colour and the
physical rate above which a record of it cannot be right. Analysis, comparison and every renderer
read it from here (pure data).

``graph`` is the GPU time of whole CUDA graph executions in a graph-level trace: their kernels,
and any copy and memset nodes, and the gaps between nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.model.units import NOT_MEASURED

# Rate limits, GB/s = bytes per ns, above which a copy or memset record cannot be right.
# Generous on purpose: host-link copies against 1,000 GB/s, above NVLink-C2C (GH200: 900 GB/s both
# directions together, 450 GB/s each way) and far above PCIe (Gen5 x16 ~64 GB/s, Gen6 x16 ~128 GB/s
# each way); device-side copies and memsets against 10,000 GB/s, above the fastest HBM (B200 HBM3e
# 8 TB/s; H200 4.8 TB/s) and NVLink 5 (1.8 TB/s per GPU).
HOST_LINK_CEILING_GBPS = 1_000.0
DEVICE_CEILING_GBPS = 10_000.0


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine. ``copy``: its records are copies with a direction; ``has_bytes``: its records
    carry bytes (copies and memsets); ``ceiling_gbps``: the rate no record of it can exceed (None
    for engines whose records carry no bytes); ``link``: what that ceiling stands for."""

    name: str
    display: str
    colour: str
    copy: bool = False
    has_bytes: bool = False
    ceiling_gbps: float | None = None
    link: str | None = None


_HOST = (HOST_LINK_CEILING_GBPS, "host link")
_DEVICE = (DEVICE_CEILING_GBPS, "device memory or GPU link")

# In display order; an engine's integer code in a parsed trace is its index here.
TABLE: tuple[Engine, ...] = (
    Engine("kernel", "kernel", "#4C72B0"),
    Engine("graph", "graph", "#8172B3"),
    Engine("h2d", "H2D", "#DD8452", True, True, *_HOST),
    Engine("d2h", "D2H", "#55A868", True, True, *_HOST),
    Engine("d2d", "D2D", "#C44E52", True, True, *_DEVICE),
    Engine("p2p", "P2P", "#937860", True, True, *_DEVICE),
    Engine("um_h2d", "UM H2D", "#DA8BC3", True, True, *_HOST),
    Engine("um_d2h", "UM D2H", "#8C8C8C", True, True, *_HOST),
    Engine("um_d2d", "UM D2D", "#CCB974", True, True, *_DEVICE),
    Engine("memset", "memset", "#64B5CD", False, True, *_DEVICE),
    Engine("other", "other copy", "#333333", True, True, *_DEVICE),
)
BY_NAME = {e.name: e for e in TABLE}
ENGINES: tuple[str, ...] = tuple(e.name for e in TABLE)
ENGINE_CODE = {name: i for i, name in enumerate(ENGINES)}
COPY_ENGINES = frozenset(e.name for e in TABLE if e.copy)
BYTE_ENGINES = frozenset(e.name for e in TABLE if e.has_bytes)
TRANSFER_ENGINES = frozenset({"h2d", "d2h"})  # the two directions of the host link
# Always reported (zeros when absent): the three engines every cluster-finder pipeline has.
ALWAYS_REPORTED = ("kernel", "h2d", "d2h")
RATE_CEILING_GBPS = {e.name: e.ceiling_gbps for e in TABLE if e.ceiling_gbps is not None}
COLOURS = {e.name: e.colour for e in TABLE}


def display_name(engine: str | None) -> str:
    """h2d -> H2D, d2h -> D2H; kernel stays kernel; None -> NOT_MEASURED ('–'); an unknown name as it is."""
    if engine is None:
        return NOT_MEASURED
    e = BY_NAME.get(engine)
    return e.display if e is not None else engine
