"""Work run beside the caller's (pure): on a thread (:func:`beside`), or in a forked process (:func:`apart`).

NumPy gives up the GIL in its loops over arrays, so analyzers that do not depend on each other can run on
other cores while the caller goes on with the ones that do; but each of their many NumPy calls takes the
GIL back, and threads in one process wait for each other there. A forked process has its own GIL: it sees
the parent's records as they are at the fork (copy on write: nothing is copied that it only reads) and
sends back only its answer, pickled. Nothing is shared but the read-only records they take. Both hand
back a :class:`concurrent.futures.Future`: ``result()`` waits and gives the value, or raises what the work
raised; the caller drops the future once it has the value, so that big arrays go when it lets them go.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# More workers than the analysis ever runs at once (three beside the chain, one inside held.find, and one
# per process apart collecting its answer), so that no job waits for a worker: a job that waits on another
# job never holds the last worker.
_POOL = ThreadPoolExecutor(max_workers=12, thread_name_prefix="clusterbench-analysis")


def _apart_default() -> bool:
    """Processes apart where they can help: Linux (elsewhere forking a process that has threads is not safe)
    and at least APART_MIN_CORES cores to run on. CLUSTERBENCH_APART=1 or 0 says so for any machine."""
    if not (sys.platform == "linux" and hasattr(os, "fork")):
        return False
    env = os.environ.get("CLUSTERBENCH_APART", "")
    if env in ("0", "1"):
        return env == "1"
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores >= APART_MIN_CORES


# On 2 cores the threads already keep both busy (docs/analyze.md, "The analyzers in processes apart"), and a
# forked process's resident pages count again in the tree's RSS: there the work stays on threads
APART_MIN_CORES = 4
APART = _apart_default()
_in_child = False  # this process is one forked by apart(): its work runs in line (the pool's threads are not here)


def beside(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Start ``fn(*args, **kwargs)`` on a thread beside this one."""
    if _in_child:
        return _done(fn, *args, **kwargs)
    return _POOL.submit(fn, *args, **kwargs)


def apart(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Start ``fn(*args)`` in a forked process (where :data:`APART`; else on a thread beside this one). Its
    answer comes back pickled; an exception it raised is raised by ``result()``. Where the process cannot
    be made, or ends without an answer, the work runs on a thread here instead, so the answer is the same."""
    global _in_child
    if not APART or _in_child:
        return beside(fn, *args)
    try:
        r, w = os.pipe()
    except OSError:
        return beside(fn, *args)
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return beside(fn, *args)
    if pid == 0:  # the child: do the work, write the answer, leave without running the parent's exit code
        code = 0
        try:
            _in_child = True
            os.close(r)
            try:
                out = (True, fn(*args))
            except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
                out = (False, exc)
            try:
                blob = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
                if not out[0]:
                    pickle.loads(blob)  # an exception whose class takes other arguments does not come back
            except Exception:  # noqa: BLE001 - an answer that does not pickle: the parent does the work itself
                blob = b""
            view = memoryview(blob)
            while view:
                view = view[os.write(w, view) :]
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    return _POOL.submit(_collect, r, pid, fn, args)


def _done(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    f: Future[T] = Future()
    try:
        f.set_result(fn(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - raised by result(), as a thread's would be
        f.set_exception(exc)
    return f


def _collect(r: int, pid: int, fn: Callable[..., T], args: tuple) -> T:
    """The child's answer (read to the end of its pipe, so that it never waits on a full one), or, where it
    sent none, the work done here."""
    chunks = []
    try:
        while True:
            b = os.read(r, 1 << 20)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(r)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    blob = b"".join(chunks)
    if not blob:
        return fn(*args)
    ok, value = pickle.loads(blob)
    if not ok:
        raise value
    return value
