"""A/A pairs among results dirs, and what compare calls them: the false-positive rate of its verdicts.

An **A/A pair** is two results dirs of one build (the same git rev, both from a clean tree) on one GPU
model: whatever compare says of them beyond SAME (or NOT COMPARABLE, where the rules say the pair cannot be
judged) is a false positive. Copies of one dir (the same session id and the same rows, such as a test
fixture copied from ``results/``) count once. Only **like-for-like figures** count: a figure across a config
difference (f32 against f64; the trace figures of nsys against cupti, whose sustained FPS is still like for
like) measures that difference, not noise, and is left out and counted as such.

Pure functions over loaded :class:`~clusterbench.model.results.ResultSet` records, plus
:func:`find_results_dirs`, which lists the dirs under a folder (no printing).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from clusterbench.compare.compare import Presence, Verdict, compare_results, params_differences, row_gpu
from clusterbench.compare.noise import FloorSet
from clusterbench.errors import InputError
from clusterbench.io.results import load_results
from clusterbench.model.results import ResultSet


@dataclass(frozen=True, slots=True)
class Moved:
    """A like-for-like figure of an A/A pair that compare called FASTER or SLOWER."""

    label: str
    metric: str
    verdict: str
    delta_pct: float | None
    reason_code: str


@dataclass(frozen=True, slots=True)
class AaJudged:
    """What compare said of one A/A pair, ``before`` then ``after`` (dir names), over its like-for-like
    figures: how many it judged SAME, how many NOT COMPARABLE (by reason code), which moved, and how many
    figures were left out as not like for like."""

    before: str
    after: str
    git_rev: str
    same: int
    not_comparable: tuple[tuple[str, int], ...]  # (reason code, count)
    moved: tuple[Moved, ...]
    not_like_for_like: int
    floors: tuple[str, ...]  # where the floors came from (the floor sets' text)

    @property
    def verdicts(self) -> int:
        return self.same + sum(n for _, n in self.not_comparable) + len(self.moved)

    @property
    def not_same(self) -> int:
        return self.verdicts - self.same


@dataclass(frozen=True, slots=True)
class AaSummary:
    """Every A/A pair judged, each way round, and the dirs or pairs left out with why."""

    judged: tuple[AaJudged, ...]
    left_out: tuple[tuple[str, str], ...]  # (dir or pair, why)

    @property
    def verdicts(self) -> int:
        return sum(j.verdicts for j in self.judged)

    @property
    def same(self) -> int:
        return sum(j.same for j in self.judged)

    @property
    def not_comparable(self) -> int:
        return sum(n for j in self.judged for _, n in j.not_comparable)

    @property
    def moved(self) -> int:
        return sum(len(j.moved) for j in self.judged)

    @property
    def false_positive_rate(self) -> float | None:
        """FASTER or SLOWER among the figures compare judged (SAME, FASTER, SLOWER); None when none was."""
        judged = self.same + self.moved
        return self.moved / judged if judged else None


def find_results_dirs(roots: Sequence[Path]) -> tuple[tuple[Path, ...], tuple[tuple[str, str], ...]]:
    """The results dirs (a folder holding probes.csv) of each root, the root itself when it is one, in name
    order; and the folders skipped with why. InputError for a root that is not a folder."""
    found: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            raise InputError(f"not a folder: {root}", hint="give folders of results dirs, such as results")
        if (root / "probes.csv").is_file():
            found.append(root)
            continue
        for d in sorted(p for p in root.iterdir() if p.is_dir()):
            if (d / "probes.csv").is_file():
                found.append(d)
            else:
                skipped.append((str(d), "no probes.csv: not a results dir"))
    return tuple(dict.fromkeys(found)), tuple(skipped)


def _model(res: ResultSet) -> str | None:
    names = {row_gpu(res, r).name for r in res.rows}
    return names.pop() if len(names) == 1 else None


def aa_groups(results: Sequence[ResultSet]) -> tuple[tuple[tuple[ResultSet, ...], ...], tuple[tuple[str, str], ...]]:
    """The dirs grouped by build and GPU model (groups of two or more dirs), copies counted once; and the dirs
    left out with why (a dirty tree, no git rev, several GPU models, a copy, no partner)."""
    left: list[tuple[str, str]] = []
    kept: list[ResultSet] = []
    for res in results:
        env = res.env
        rev = env.git_rev if env is not None else None
        if not rev:
            left.append((str(res.path), "records no git rev: not a known build"))
        elif env is not None and env.git_dirty:
            left.append((str(res.path), f"dirty tree at {rev[:12]}: not one known build"))
        elif _model(res) is None:
            left.append((str(res.path), "rows of several GPU models, or none named"))
        else:
            twin = next((k for k in kept if k.env is not None and k.env.session_id == env.session_id  # type: ignore[union-attr]
                         and k.rows == res.rows), None)
            if twin is not None:
                left.append((str(res.path), f"a copy of {twin.path} (same session and rows): counted once"))
            else:
                kept.append(res)
    groups: dict[tuple[str, str], list[ResultSet]] = {}
    for res in kept:
        groups.setdefault((str(_model(res)), str(res.env.git_rev)), []).append(res)  # type: ignore[union-attr]
    out = []
    for (_, rev), members in groups.items():
        if len(members) < 2:
            left.append((str(members[0].path), f"no other dir of git {rev[:12]}: no A/A partner"))
        else:
            out.append(tuple(members))
    return tuple(out), tuple(left)


def judge_pair(before: ResultSet, after: ResultSet, floors: Mapping[str, FloorSet]) -> AaJudged:
    """compare of one A/A pair with ``floors``, counted over its like-for-like figures."""
    cmp = compare_results(before, after, floors=floors)
    same = 0
    nc: dict[str, int] = {}
    moved: list[Moved] = []
    other = 0
    for r in cmp.rows:
        if r.presence is not Presence.BOTH:
            continue
        for m in r.metrics:
            if m.verdict is Verdict.MISSING:
                continue
            if m.across or m.code.value == "config_differs":
                other += 1
            elif m.verdict is Verdict.SAME:
                same += 1
            elif m.verdict is Verdict.NOT_COMPARABLE:
                nc[m.code.value] = nc.get(m.code.value, 0) + 1
            else:
                moved.append(Moved(r.label, m.name, m.verdict.value, m.delta_pct, m.code.value))
    rev = str(before.env.git_rev) if before.env is not None else ""
    return AaJudged(before.name, after.name, rev, same, tuple(sorted(nc.items())), tuple(moved), other,
                    tuple(fs.text for fs in cmp.floors))


def judge_aa(results: Sequence[ResultSet],
             floors_of: Callable[[ResultSet, ResultSet], Mapping[str, FloorSet]]) -> AaSummary:
    """Every A/A pair among ``results`` (:func:`aa_groups`), each way round, judged with the floors
    ``floors_of(before, after)`` gives. A pair without a like-for-like figure is left out, with why."""
    groups, left_out = aa_groups(results)
    left = list(left_out)
    judged = []
    for group in groups:
        for x, y in itertools.combinations(group, 2):
            differ = params_differences(x, y)
            if differ:
                left.append((f"{x.name} / {y.name}", f"the workload params differ ({'; '.join(differ)}): not an "
                             "A/A pair"))
                continue
            both = [judge_pair(before, after, floors_of(before, after)) for before, after in ((x, y), (y, x))]
            if both[0].verdicts:
                judged.extend(both)
            elif both[0].not_like_for_like:
                left.append((f"{x.name} / {y.name}", "every figure in common is across a config difference: not "
                             "an A/A pair"))
            else:
                left.append((f"{x.name} / {y.name}", "no config label in common"))
    return AaSummary(tuple(judged), tuple(left))


def held_out_floors(results: Sequence[ResultSet]) -> Callable[[ResultSet, ResultSet], Mapping[str, FloorSet]]:
    """A ``floors_of`` for :func:`judge_aa` that judges each pair with floors made only of A/A dirs measured on
    other GPU units than the pair's two: an out-of-sample check, since floors made of a pair's own differences
    clear it by construction. The A/A sets are the groups of :func:`aa_groups` whose dirs ran one config
    (``clusterbench floors`` takes nothing else); provisional floors are used too. A pair with no such dirs is
    judged with no floors file (the seed's rules)."""
    from clusterbench.compare.floors import aa_floors

    groups, _ = aa_groups(results)

    def unit(res: ResultSet) -> str:
        return str(res.env.gpu_uuid if res.env is not None else None)

    def floors_of(before: ResultSet, after: ResultSet) -> Mapping[str, FloorSet]:
        mine = {unit(before), unit(after)}
        sets = [[d for d in g if unit(d) not in mine] for g in groups]
        out: dict[str, FloorSet] = {}
        usable = []
        for g in sets:
            if len(g) < 2:
                continue
            try:
                aa_floors(g)
            except InputError:  # not one config (f32 against f64 of one build): not an A/A set for floors
                continue
            usable.extend(g)
        if usable:
            fs = aa_floors(usable).floors
            out[str(fs.gpu_name)] = fs
        return out

    return floors_of


def load_dirs(paths: Sequence[Path]) -> tuple[tuple[ResultSet, ...], tuple[tuple[str, str], ...]]:
    """Each dir loaded, or left out with the reason it could not be read."""
    out: list[ResultSet] = []
    left: list[tuple[str, str]] = []
    for p in paths:
        try:
            out.append(load_results(p))
        except InputError as exc:
            left.append((str(p), f"not readable: {exc}"))
    return tuple(out), tuple(left)
