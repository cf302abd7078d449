"""Where a command's outputs go: never over one of its inputs, and never half written.

Every command that writes a file or a folder (analyze --plot and --export-trace, compare --plot, history
--plot, --html and --db, baseline set --db, floors --out, probe's results dir, --db and --plot) checks its
outputs here before it reads or writes anything:

- :func:`refuse_inputs_as_outputs`: an output that is one of the command's inputs is refused (InputError,
  exit 2). "Is" means the same path once resolved (``./T.sqlite`` and ``/a/../T.sqlite``, a symbolic link)
  or the same file on disk (device and inode: a hard link); an output folder is refused when an input
  file lies inside it. Two inputs may well be one file (``compare T T``): only outputs are checked.
- :func:`refuse_stdout_as_input`: standard output redirected into an input (``analyze T.sqlite --json >
  T.sqlite``). The shell empties the file before the command starts, so nothing can be saved by then;
  the error says what happened, so that the user does not read it as a broken trace.
- :func:`atomic_write` / :func:`atomic_write_text`: each output file is written to a temporary file in
  its own folder and renamed over the target at the end, so a failed write (a full disk, Ctrl-C, an
  error in the writer) leaves the old file, or none, never a half-written one. A write that fails is an
  InputError naming the option and the file (a full disk is an Error line, exit 2, not a traceback).
- :func:`check_writable_dir`: a folder that does not exist yet is checked by creating (and removing) a
  temporary folder in its nearest existing ancestor: permissions alone do not tell (root may write
  anywhere by its permissions, but not into /proc).

The core never prints; these raise :class:`~clusterbench.errors.InputError` with the message and hint.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Sequence

from clusterbench.errors import InputError

# (what the user calls it, the path): "--plot" or "TRACE", "DIR_A", "--config" ...
Named = tuple[str, Path]

_TMP_TAG = ".clusterbench-tmp"


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file ``path`` names (links followed), or None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _resolved(path: Path) -> Path:
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError):  # a loop of links: compare the path as given
        return Path(os.path.abspath(path))


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same resolved path, or the same device and inode."""
    if _resolved(a) == _resolved(b):
        return True
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def _inside(path: Path, folder: Path) -> bool:
    p, f = _resolved(path), _resolved(folder)
    return p == f or f in p.parents


# How many files of an input folder (and its folders) are compared with standard output at most: a results
# root holds a few hundred; a folder of millions is not walked whole for this.
_MAX_WALK = 20_000


# The files of an input folder that are a user's data (a results dir's records and traces, frames, a history
# database); other files there (a plot of an earlier run, a note) may be written over.
DATA_NAMES = frozenset({"probes.csv", "env.json", "samples.json"})
DATA_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".npy", ".db", ".toml", ".sustained.json", ".pass.json", ".untraced.json",
                 ".latency.json", ".model.json")


def is_data_file(name: str) -> bool:
    return name in DATA_NAMES or name.endswith(DATA_SUFFIXES)


def _files_of(inputs: Iterable[Named], deep: bool = False) -> list[Named]:
    """The input files: each input file, and the data files (:func:`is_data_file`) directly inside each input
    folder (a results dir's probes.csv, env.json, samples.json, traces); ``deep``: at any depth (``history
    import FOLDER``)."""
    out: list[Named] = []
    for name, path in inputs:
        p = Path(path)
        if not p.is_dir():
            out.append((name, p))
            continue
        if not deep:
            with contextlib.suppress(OSError):
                out += [(f"{name} ({e.name})", Path(e.path)) for e in os.scandir(p)
                        if is_data_file(e.name) and e.is_file()]
            continue
        seen = 0
        for folder, _dirs, files in os.walk(p):
            out += [(f"{name} ({Path(folder, f).relative_to(p)})", Path(folder, f)) for f in files if is_data_file(f)]
            seen += len(files)
            if seen > _MAX_WALK:
                break
    return out


def refuse_inputs_as_outputs(outputs: Sequence[tuple[str, Path | None]], inputs: Sequence[tuple[str, Path | None]],
                             folders: Sequence[tuple[str, Path | None]] = ()) -> None:
    """InputError when an output file (``outputs``) is an input file or an input folder, or an output
    folder (``folders``) is an input or holds one. Each pair is (the option or argument, the path); None
    paths are skipped. Nothing is read or written."""
    given = [(n, Path(p)) for n, p in inputs if p is not None]
    outs = [(n, Path(p)) for n, p in outputs if p is not None]
    for i, (option, out) in enumerate(outs):
        for other, path in outs[:i]:
            if same_file(out, path):
                raise InputError(f"{other} and {option} name one file, {out}: the second would replace the first",
                                 hint=f"give {other} and {option} different file names")
    for option, out in outs:
        for name, inp in given:
            if same_file(out, inp):
                raise InputError(f"{option} {out} is the input {name} {inp}: writing it would destroy that input",
                                 hint=f"give {option} another file name; clusterbench never writes over an input")
        for name, inp in _files_of((n, p) for n, p in given if p.is_dir()):
            if same_file(out, inp):
                raise InputError(f"{option} {out} is the input {name}: writing it would destroy that input",
                                 hint=f"give {option} a file outside the input dirs")
    for option, folder in ((n, Path(p)) for n, p in folders if p is not None):
        for name, inp in given:
            if _inside(inp, folder) or same_file(folder, inp):
                raise InputError(f"{option} {folder} holds the input {name} {inp}: clusterbench does not write "
                                 "into a folder that holds its inputs",
                                 hint=f"give {option} a new or empty folder")


def refuse_stdout_as_input(inputs: Sequence[tuple[str, Path | None]], option: str = "the output") -> None:
    """InputError when standard output is redirected into an input file, or into a file inside an input
    folder: ``analyze T.sqlite --json > T.sqlite``. The shell emptied that file before this process
    started: the message says so (the file now reads as an empty or broken input)."""
    try:
        st = os.fstat(1)
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(st.st_mode):
        return  # a terminal, a pipe, /dev/null: nothing on disk to lose
    out = (st.st_dev, st.st_ino)
    for name, path in _files_of(((n, Path(p)) for n, p in inputs if p is not None), deep=True):
        if _identity(path) == out:
            now = path.stat().st_size if path.exists() else 0
            what = ("the shell emptied it before clusterbench started (0 bytes now)" if now == 0 else
                    f"{option} would be appended to it ({now:,} bytes now)")
            raise InputError(f"standard output is redirected into the input {name} {path}: {what}",
                             hint="redirect the output to another file (> out.json); an emptied trace comes back "
                                  "from its report: nsys export --type sqlite -o OUT.sqlite REPORT.nsys-rep")


def check_writable_dir(path: Path, option: str) -> None:
    """InputError unless folder ``path`` exists and takes new files, or can be made: tried for real
    (a temporary folder is made and removed again in ``path`` or its nearest existing ancestor)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} {p} is a file, not a folder", hint=f"give {option} a folder")
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError(f"{option} {p}: {probe} is a file, not a folder", hint=f"give {option} a writable folder")
    try:
        made = tempfile.mkdtemp(prefix=_TMP_TAG + ".", dir=probe)
    except OSError as exc:
        raise InputError(f"{option}: {p} cannot be written: no folder can be made in {probe} "
                         f"({exc.strerror or exc})",
                         hint=f"give {option} a folder you can write to") from None
    with contextlib.suppress(OSError):
        os.rmdir(made)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[Path], None], what: str, hint: str | None = None) -> Path:
    """Write file ``path`` through ``write(tmp)``, which writes a temporary file in the same folder (with the
    same suffix, for writers that go by it); it is then flushed to disk and renamed over ``path``. Any
    failure (OSError: a full disk, a folder that is gone) leaves ``path`` as it was and no temporary file,
    and is an InputError "cannot write ``what`` ``path``: why" (``what``: "the plot", "--out" ...).
    Returns ``path``."""
    path = Path(path)
    hint = hint or "write it to a writable folder with free space"
    if path.is_dir():
        raise InputError(f"cannot write {what}: {path} is a directory", hint=hint)
    real = Path(os.path.realpath(path))  # through a symbolic link: the link stays, its file is replaced
    try:
        special = real.exists() and not stat.S_ISREG(os.stat(real).st_mode)
    except OSError:
        special = False
    if special:  # /dev/null, /dev/stdout, a FIFO: written into as it is, never replaced by a file
        try:
            write(real)
        except OSError as exc:
            raise InputError(f"cannot write {what} {path}: {exc.strerror or exc}", hint=hint) from None
        return path
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{real.name}.", suffix=_TMP_TAG + real.suffix, dir=real.parent)
        os.close(fd)
    except OSError as exc:
        raise InputError(f"cannot write {what} {path}: {exc.strerror or exc}", hint=hint) from None
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # as a plain open() would have made it (mkstemp makes 0600)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise InputError(f"cannot write {what} {path}: {exc.strerror or exc}", hint=hint) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def atomic_write_text(path: Path, text: str, what: str, hint: str | None = None) -> Path:
    """:func:`atomic_write` of ``text`` (UTF-8)."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)

    return atomic_write(path, write, what, hint)


def claim_output_folder(path: Path, marker: str, option: str, what: str, refused_markers: Sequence[str] = ()) -> None:
    """Make sure folder ``path`` is clusterbench's own output folder of one kind, marked by the file
    ``marker`` inside it, before anything is written there: a folder that does not exist, or is empty, is
    made and marked; one that holds ``marker`` is clusterbench's (a second run updates it). InputError for a
    file, for a folder holding any of ``refused_markers`` (a results dir: probes.csv, env.json), and for any
    other folder that holds something: clusterbench writes only where it wrote before."""
    p = Path(path)
    hint = f"give {option} a new or empty folder (or one clusterbench wrote {what} into before)"
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} needs a folder, and {p} is a file", hint=hint)
    if p.is_dir():
        try:
            names = sorted(os.listdir(p))
        except OSError as exc:
            raise InputError(f"{option} {p} cannot be read: {exc.strerror or exc}", hint=hint) from None
        found = [m for m in refused_markers if m in names]
        if found:
            raise InputError(f"{option} {p} is a results dir (it holds {', '.join(found)}): clusterbench writes "
                             f"{what} only into a folder of its own", hint=hint)
        if names and marker not in names:
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            raise InputError(f"{option} {p} holds files that clusterbench did not write ({shown}): it writes {what} "
                             f"only into a new or empty folder, or one marked as its own ({marker})", hint=hint)
        if marker in names:
            return
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot make {option} {p}: {exc.strerror or exc}", hint=hint) from None
    atomic_write_text(p / marker, f"This folder holds {what}, written by clusterbench; it updates it in place.\n",
                      f"{option} marker")
