"""A measurement: one metric's raw samples kept together with what they were measured under.

pyperf's ``Run(values, metadata)`` is the anchor: the samples are the record, and every summary
(median, spread, min, max, repeats, input rate) is derived from them, with the one median of
:mod:`clusterbench.model.stats`. A results dir stores each row's measurements beside its probes.csv
row (samples.json), so compare tests the samples themselves.

Pure: no I/O, no GPU, no UI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from clusterbench.model.jsontypes import check_json, json_type_words, json_types, json_value_words
from clusterbench.model.stats import half_range, median

JsonValue = object  # a value json.dumps accepts

# The metric of the untraced sustained run: frames per second of each timed pass.
SUSTAINED_FPS = "sustained_fps"
# A program that reports its speed in GB/s only (read from its output): GB/s of each run.
SUSTAINED_GBPS = "sustained_gbps"


@dataclass(frozen=True, slots=True)
class Measurement:
    """``samples`` of ``metric`` (the probes.csv column its median goes to; the unit is in the name,
    e.g. ``sustained_fps``), in the order they were taken. ``input_bytes_per_frame``: for a rate in
    frames per second, the input bytes each frame carries (gives :attr:`input_gbps`); ``metadata``:
    anything else about how they were taken, kept as it is."""

    metric: str
    samples: tuple[float, ...]
    input_bytes_per_frame: int | None = None
    metadata: Mapping[str, JsonValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric:
            raise ValueError(f"a measurement needs a metric name, got {self.metric!r}")
        values = tuple(self.samples)
        if not values:
            raise ValueError(f"a measurement of {self.metric} needs at least one sample")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"the samples of {self.metric} must be finite numbers > 0, got {v!r}")
        object.__setattr__(self, "samples", tuple(float(v) for v in values))
        b = self.input_bytes_per_frame
        if b is not None and (type(b) is not int or b < 1):
            raise ValueError(f"input_bytes_per_frame must be an integer >= 1 or None, got {b!r}")
        object.__setattr__(self, "metadata", dict(self.metadata))

    @property
    def median(self) -> float:
        return median(self.samples)

    @property
    def spread(self) -> float:
        """Half the min-max range of the samples (what probes.csv writes as ``<metric>_spread``)."""
        return half_range(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def repeats(self) -> int:
        return len(self.samples)

    @property
    def input_gbps(self) -> float | None:
        """The median rate times the input bytes per frame, in GB/s (1e9 B/s); None when unknown."""
        if self.input_bytes_per_frame is None:
            return None
        return self.median * self.input_bytes_per_frame / 1e9

    def to_json(self) -> dict[str, JsonValue]:
        return {"metric": self.metric, "samples": list(self.samples),
                "input_bytes_per_frame": self.input_bytes_per_frame, "metadata": dict(self.metadata)}

    @classmethod
    def from_json(cls, doc: Mapping[str, JsonValue], file: str = "samples.json",
                  block: str = "measurement") -> "Measurement":
        """From the JSON of :meth:`to_json`, the block ``block`` of ``file`` (both named in errors).
        ValueError names what is wrong (the reader of a file adds its path)."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"{file} block '{block}' must be an object, got {json_value_words(doc)}")
        for name, hint in _JSON.items():
            if name in _REQUIRED and name not in doc:
                raise ValueError(f"{file} block '{block}' lacks '{name}' ({json_type_words(hint)})")
            if name in doc:
                check_json(file, f"{block}.{name}", doc[name], hint, nullable=name not in _REQUIRED)
        try:
            return cls(metric=doc["metric"], samples=tuple(doc["samples"]),  # type: ignore[arg-type]
                       input_bytes_per_frame=doc.get("input_bytes_per_frame"),  # type: ignore[arg-type]
                       metadata=doc.get("metadata") or {})  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"{file} block '{block}': {exc}") from None


# The JSON type of each block of a measurement: its field's
_JSON: dict[str, object] = json_types(Measurement)
_REQUIRED = ("metric", "samples")
