"""clusterbench's own native tools, built on the user's machine from the package's sources with the CUDA
toolkit's compiler, and the injection library's settings and report.

- ``cb_inject`` (``native/cb_inject.cpp``): a CUDA injection library (``CUDA_INJECTION64_PATH``; CUPTI
  callbacks only, no activity records) that times the program's runtime and driver API calls per thread,
  marks its frames, and can add a deliberate delay per frame to the host, the GPU or the link
  (:class:`clusterbench.model.untraced.InjectReport` reads what it writes).
- ``cb_latency`` (``native/cb_latency.cu``): the unit's latency between dependent work on one stream and the
  round trip at a synchronize (:mod:`clusterbench.run.latency` runs it).

Each is built once per source, compiler and target (the key hashes them) into the cache
(``$CLUSTERBENCH_CACHE_DIR/native``, else ``$XDG_CACHE_HOME/clusterbench/native``, else
``~/.cache/clusterbench/native``), through a temporary file renamed into place. Without nvcc or CUPTI's
headers and library, :func:`find_toolkit` raises an EnvironmentFailure (exit 1) that says where it looked
and what to set. Nothing here prints or exits.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.model.untraced import InjectReport

INJECT_SOURCE = "cb_inject.cpp"
LATENCY_SOURCE = "cb_latency.cu"
INJECT_LIB = "libcb_inject.so"
LATENCY_BIN = "cb_latency"
CACHE_ENV = "CLUSTERBENCH_CACHE_DIR"
NVCC_ENV = "CLUSTERBENCH_NVCC"
CUPTI_ENV = "CLUSTERBENCH_CUPTI_DIR"  # a folder with include/cupti.h and lib64/ (or lib/) libcupti.so
ARCH_ENV = "CLUSTERBENCH_CUDA_ARCH"  # e.g. sm_90; default: the first GPU's, else sm_90
BUILD_TIMEOUT_S = 300.0
# The CUDA driver loads the library named here at cuInit and calls its InitializeInjection().
INJECTION_ENV = "CUDA_INJECTION64_PATH"
# The frames a graph launch marks (probe's and analyze's --frames graph)
GRAPH_MARK = "api:cudaGraphLaunch|cuGraphLaunch"
TOOLKIT_HINT = ("install the CUDA toolkit (nvcc, and CUPTI, which it ships in extras/CUPTI or its include and "
                "lib64 folders), or point CLUSTERBENCH_NVCC at nvcc and CLUSTERBENCH_CUPTI_DIR at CUPTI's folder")


def native_dir() -> Path:
    """Where the package keeps the native sources."""
    return Path(__file__).resolve().parent / "native"


@dataclass(frozen=True, slots=True)
class Toolkit:
    """The compiler and the CUPTI it builds against: nvcc, its version line, CUPTI's include and library
    folders."""

    nvcc: Path
    version: str
    cupti_include: Path
    cupti_lib: Path


DEFAULT_CUDA = Path("/usr/local/cuda")  # where the toolkit installs by default: searched last


def _nvcc(environ: Mapping[str, str], default: Path) -> Path | None:
    for c in (environ.get(NVCC_ENV), environ.get("NVCC"), shutil.which("nvcc", path=environ.get("PATH")),
              f"{environ.get('CUDA_HOME', '/nonexistent')}/bin/nvcc", str(default / "bin" / "nvcc")):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    return None


def _cupti_dirs(nvcc: Path, environ: Mapping[str, str], default: Path) -> list[Path]:
    roots = []
    if environ.get(CUPTI_ENV):
        roots.append(Path(environ[CUPTI_ENV]))
    top = nvcc.resolve().parent.parent
    for base in (top, Path(environ.get("CUDA_HOME", "/nonexistent")), default):
        roots += [base / "extras" / "CUPTI", base]
    for site in sys.path:  # pip's NVIDIA wheels: nvidia/cuda_cupti, nvidia/cu13
        if site.endswith("-packages"):
            roots += [Path(p) for p in sorted(glob.glob(os.path.join(site, "nvidia", "*")))]
    return roots


def find_toolkit(environ: Mapping[str, str] | None = None, default: Path = DEFAULT_CUDA) -> Toolkit:
    """nvcc and CUPTI's headers and library; EnvironmentFailure (exit 1) saying what is missing and where it
    looked (``default``: the toolkit's default folder, searched last)."""
    env = os.environ if environ is None else environ
    nvcc = _nvcc(env, default)
    if nvcc is None:
        raise EnvironmentFailure("clusterbench's injection library and latency program are built with nvcc, and no "
                                 f"nvcc was found (${NVCC_ENV}, $NVCC, PATH, $CUDA_HOME/bin, {default}/bin)",
                                 hint=TOOLKIT_HINT)
    inc = lib = None
    looked = []
    for root in _cupti_dirs(nvcc, env, default):
        looked.append(str(root))
        if inc is None and (root / "include" / "cupti.h").is_file():
            inc = root / "include"
        if lib is None:
            for sub in ("lib64", "lib"):
                found = sorted((root / sub).glob("libcupti.so*")) if (root / sub).is_dir() else []
                if found:
                    lib = root / sub
                    break
        if inc is not None and lib is not None:
            break
    if inc is None or lib is None:
        what = "cupti.h" if inc is None else "libcupti.so"
        raise EnvironmentFailure(f"the injection library needs CUPTI, and {what} was not found (looked in "
                                 f"{', '.join(dict.fromkeys(looked))})", hint=TOOLKIT_HINT)
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentFailure(f"{nvcc} --version did not run: {exc}", hint=TOOLKIT_HINT) from None
    version = next((ln.strip() for ln in out.splitlines() if "release" in ln), out.strip().splitlines()[-1] if out.strip() else "?")
    return Toolkit(nvcc, version, inc, lib)


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]) / "native"
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "clusterbench" / "native"


def gpu_arch(environ: Mapping[str, str] | None = None) -> str:
    """The target of the latency program: $CLUSTERBENCH_CUDA_ARCH, else the first GPU's (nvidia-smi),
    else sm_90."""
    env = os.environ if environ is None else environ
    if env.get(ARCH_ENV):
        return env[ARCH_ENV]
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=30).stdout
            m = re.match(r"\s*(\d+)\.(\d+)", out)
            if m:
                return f"sm_{m.group(1)}{m.group(2)}"
        except (OSError, subprocess.SubprocessError):
            pass
    return "sm_90"


def build_command(tool: str, tk: Toolkit, out: Path, arch: str = "sm_90") -> list[str]:
    """The nvcc command that builds ``tool`` (INJECT_LIB or LATENCY_BIN) into ``out`` (pure)."""
    src = native_dir()
    if tool == INJECT_LIB:
        return [str(tk.nvcc), "-O2", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", f"-I{tk.cupti_include}",
                str(src / INJECT_SOURCE), "-o", str(out), f"-L{tk.cupti_lib}", "-lcupti", "-ldl", "-lpthread",
                "-Xlinker", f"-rpath={tk.cupti_lib}"]
    if tool == LATENCY_BIN:
        return [str(tk.nvcc), "-O2", "-std=c++17", f"-arch={arch}", str(src / LATENCY_SOURCE), "-o", str(out)]
    raise ValueError(f"unknown tool {tool!r}")


def build_key(tool: str, tk: Toolkit, arch: str) -> str:
    """The cache key of a build: the source, the compiler's version, CUPTI's folders and the target."""
    src = native_dir() / (INJECT_SOURCE if tool == INJECT_LIB else LATENCY_SOURCE)
    h = hashlib.sha256(src.read_bytes())
    for part in (tool, tk.version, str(tk.nvcc), str(tk.cupti_include), str(tk.cupti_lib),
                 arch if tool == LATENCY_BIN else ""):
        h.update(b"\0" + part.encode())
    return h.hexdigest()[:16]


def build(tool: str, tk: Toolkit | None = None, environ: Mapping[str, str] | None = None,
          timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """The built ``tool`` (INJECT_LIB or LATENCY_BIN), from the cache or compiled now. EnvironmentFailure
    (exit 1) when no toolkit is found or the build fails (with the compiler's last lines)."""
    tk = tk or find_toolkit(environ)
    arch = gpu_arch(environ) if tool == LATENCY_BIN else ""
    folder = cache_root(environ) / build_key(tool, tk, arch)
    out = folder / tool
    if out.is_file():
        return out
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot make the build folder {folder}: {exc}",
                                 hint=f"set {CACHE_ENV} to a writable folder") from None
    tmp = folder / f".{tool}.{os.getpid()}.tmp"
    cmd = build_command(tool, tk, tmp, arch or "sm_90")
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentFailure(f"building {tool} did not run: {exc}", hint=TOOLKIT_HINT) from None
    if res.returncode != 0 or not tmp.is_file():
        tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-12:])
        tmp.unlink(missing_ok=True)
        raise EnvironmentFailure(f"building {tool} failed (exit status {res.returncode}):\n$ {' '.join(cmd)}\n{tail}",
                                 hint=TOOLKIT_HINT)
    (folder / "build.json").write_text(json.dumps({"command": cmd, "nvcc": tk.version}, indent=2) + "\n")
    os.replace(tmp, out)
    return out


# --------------------------------------------------------------------------- the injection library's runs


def mark_of(frames_spec: str | None) -> tuple[str | None, str | None]:
    """The injection library's frame mark for a frames definition as analyze takes it (pure): (mark, None),
    or (None, why it cannot mark them). ``kernel:REGEX`` marks launches of matching kernels, ``graph``
    graph launches; a count, an NVTX range or H2D bytes cannot be seen at a call."""
    spec = (frames_spec or "").strip()
    if spec.startswith("kernel:") and len(spec) > len("kernel:"):
        return spec, None
    if spec == "graph":
        return GRAPH_MARK, None
    what = "no frames definition" if not spec else f"--frames {spec}"
    return None, (f"{what}: the injection library marks a frame at a call, so the frames must be kernel launches "
                  "(--frames kernel:REGEX) or graph launches (--frames graph)")


def inject_env(lib: Path, out: Path, mark: str, *, warmup: int = 0, host_us: float = 0.0, gpu_us: float | None = None,
               link_bytes: int | None = None, domains: str = "runtime,driver",
               max_marks: int = 100_000) -> dict[str, str]:
    """The environment of a run with the injection library (pure): its report goes to ``out``."""
    env = {INJECTION_ENV: str(lib), "CB_INJECT_OUT": str(out), "CB_INJECT_MARK": mark, "CB_INJECT_WARMUP": str(warmup),
           "CB_INJECT_MAX_MARKS": str(max_marks), "CB_INJECT_DOMAINS": domains}
    if host_us > 0:
        env["CB_INJECT_HOST_US"] = f"{host_us:g}"
    if gpu_us is not None:
        env["CB_INJECT_GPU_US"] = f"{gpu_us:g}"
    if link_bytes is not None:
        env["CB_INJECT_LINK_BYTES"] = str(int(link_bytes))
    return env


def read_report(path: Path) -> InjectReport:
    """An injection library's report; InputError (exit 2) naming the file and what is wrong."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read the injection report: {exc.strerror or exc}",
                         hint="the program must run to its end (the report is written at exit)") from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})", hint="the report is written whole at exit; rerun the program") from None
    try:
        return InjectReport.from_json(doc)
    except ValueError as exc:
        raise InputError(f"{path}: not an injection report this clusterbench reads: {exc}",
                         hint="write it with this clusterbench's injection library") from None
