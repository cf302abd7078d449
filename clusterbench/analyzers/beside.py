"""Work run on a thread beside the caller's (pure): NumPy gives up the GIL in its loops over arrays, so
analyzers that do not depend on each other run on other cores while the caller goes on with the ones that
do. Nothing is shared but the read-only records they take; ``result()`` hands back the value (once: the
thread keeps no reference to it, so that big arrays go when the caller lets them go), or raises what the
work raised."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Beside(Generic[T]):
    """``fn(*args, **kwargs)`` started on a thread of its own at once; ``result()`` waits for it."""

    __slots__ = ("_thread", "_value", "_error")

    def __init__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), name="clusterbench-analysis",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _run(self, fn: Callable[..., T], args: tuple, kwargs: dict) -> None:
        try:
            self._value = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        value, self._value = self._value, None
        return value  # type: ignore[return-value]


def beside(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Beside[T]:
    """Start ``fn(*args, **kwargs)`` on a thread beside this one."""
    return Beside(fn, *args, **kwargs)
