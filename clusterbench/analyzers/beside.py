"""Work run on a thread beside the caller's (pure): NumPy gives up the GIL in its loops over arrays, so
analyzers that do not depend on each other run on other cores while the caller goes on with the ones that
do. Nothing is shared but the read-only records they take. :func:`beside` hands back a
:class:`concurrent.futures.Future`: ``result()`` waits and gives the value, or raises what the work raised;
the caller drops the future once it has the value, so that big arrays go when it lets them go."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# More workers than the analysis ever runs at once (three beside the chain, one inside held.find), so that
# no job waits for a worker: a job that waits on another job never holds the last worker.
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="clusterbench-analysis")


def beside(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Start ``fn(*args, **kwargs)`` on a thread beside this one."""
    return _POOL.submit(fn, *args, **kwargs)
