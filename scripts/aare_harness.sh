#!/usr/bin/env bash
# Builds aare's own CUDA cluster-finder test harness (src/ClusterFinderCUDA.test.cu at 5922c73, a
# standalone main() that no CMake target builds), unmodified, against a kit build made by
# `make aare-cuda`; writes its two .npy inputs; prints the command line that runs it.
# docs/aare-cuda.md ("aare as it is") says what the harness measures and what its printed rates include.
#
#   bash scripts/aare_harness.sh [BUILD_DIR [OUT_DIR [PEDESTAL_FRAMES DATA_FRAMES]]]
#
# Messages go to stderr; stdout holds only the command line, so `cmd=$(bash scripts/aare_harness.sh ...)`
# captures it. Exit status: 0 done, 1 a compile or input step failed, 2 bad arguments or a missing or
# incomplete build dir.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=aare_harness

usage() {
    cat <<EOF
usage: bash scripts/aare_harness.sh [BUILD_DIR [OUT_DIR [PEDESTAL_FRAMES DATA_FRAMES]]]

Compiles aare's src/ClusterFinderCUDA.test.cu (unmodified) into OUT_DIR/aare_cf_cuda_test, for
sm_\${CUDA_ARCH:-90}, against BUILD_DIR's libaare_core.a, libfmt.a and headers (skipped when up to date);
writes OUT_DIR/pedestal.npy and OUT_DIR/data.npy with numpy (skipped when they already match);
prints the command line that runs the harness on stdout.

  BUILD_DIR        a kit build dir made by 'make aare-cuda' (default: $root/build/aare-cuda)
  OUT_DIR          where the binary and the inputs go (default: $root/build/aare-harness);
                   the inputs take (2 x PEDESTAL_FRAMES + DATA_FRAMES) x 320,000 bytes
  PEDESTAL_FRAMES  dark frames (default 1000; aare's CUDA pedestal assumes exactly 1000 samples)
  DATA_FRAMES      frames with photons (default 1000)

The harness seeks the data file to frame PEDESTAL_FRAMES before reading, so data.npy holds the same
PEDESTAL_FRAMES dark frames first, then DATA_FRAMES frames with photons.

Environment (optional): NVCC (default: the kit's CMAKE_CUDA_COMPILER, else nvcc on PATH),
HOST_CXX (nvcc -ccbin; default: the kit's CMAKE_CXX_COMPILER), CUDA_ARCH (90), PYTHON (python3, needs
numpy), NSIGMA (5, the harness's argv[5]), SEED (20261201).
EOF
}

die() { echo "$me: Error: $1" >&2; [ -z "${2:-}" ] || echo "$me: Hint: $2" >&2; exit "${3:-2}"; }
say() { echo "$me: $*" >&2; }

case "${1:-}" in -h|--help) usage; exit 0 ;; esac
[ $# -le 4 ] || { usage >&2; exit 2; }
[ $# -ne 3 ] || die "give both PEDESTAL_FRAMES and DATA_FRAMES, or neither" "bash scripts/aare_harness.sh --help"

build=${1:-$root/build/aare-cuda}
out=${2:-$root/build/aare-harness}
n_ped=${3:-1000}
n_data=${4:-1000}
nsigma=${NSIGMA:-5}
seed=${SEED:-20261201}
arch=${CUDA_ARCH:-90}
PYTHON=${PYTHON:-python3}
for v in "$n_ped" "$n_data" "$seed" "$arch"; do
    [[ $v =~ ^[0-9]+$ ]] || die "not a whole number: '$v'" "bash scripts/aare_harness.sh --help"
done
[ "$n_ped" -ge 1 ] && [ "$n_data" -ge 1 ] || die "PEDESTAL_FRAMES and DATA_FRAMES must be at least 1"
[ "$n_ped" -ge 1000 ] || say "WARNING: $n_ped pedestal frames: aare's CUDA kernel divides the pedestal sums by 1000, so with fewer the GPU noise (and its clusters) are wrong"

# --- the kit build dir ------------------------------------------------------------------------
[ -d "$build" ] || die "no aare kit build dir at $build" \
    "run 'make aare-cuda' first (it builds into build/aare-cuda; AARE_OUT=DIR picks another), or pass its BUILD_DIR"
build=$(cd "$build" && pwd)
shopt -s nullglob
srcs=("$build"/src/aare-*/src/ClusterFinderCUDA.test.cu)
fmts=("$build"/src/fmt-*/include/fmt/format.h)
shopt -u nullglob
[ ${#srcs[@]} -eq 1 ] || die "expected one $build/src/aare-*/src/ClusterFinderCUDA.test.cu, found ${#srcs[@]}" \
    "is $build a kit build dir? 'make aare-cuda' unpacks the sources into BUILD_DIR/src"
[ ${#fmts[@]} -eq 1 ] || die "expected one fmt source tree under $build/src, found ${#fmts[@]}" \
    "rebuild with 'make aare-cuda'"
src=${srcs[0]}
aare_dir=$(dirname "$(dirname "$src")")
fmt_inc=$(dirname "$(dirname "${fmts[0]}")")
lib_core=$build/build/libaare_core.a
lib_fmt=$build/build/_deps/fmt-build/libfmt.a
cache=$build/build/CMakeCache.txt
for f in "$lib_core" "$lib_fmt"; do
    [ -f "$f" ] || die "missing $f: the kit build in $build is incomplete" "run 'make aare-cuda' again (it rebuilds incrementally)"
done
cache_var() { [ -f "$cache" ] && sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -1 || true; }

if [ -z "${NVCC:-}" ]; then
    NVCC=$(cache_var CMAKE_CUDA_COMPILER)
    [ -n "$NVCC" ] && [ -x "$NVCC" ] || NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
fi
[ -x "$NVCC" ] || die "nvcc not found ($NVCC)" "set NVCC=/path/to/nvcc"
# Host compiler: the one that compiled libaare_core.a, so that the harness links against the same
# libstdc++ (a newer compiler's archive does not link with an older libstdc++).
host_cxx=${HOST_CXX:-$(cache_var CMAKE_CUDA_HOST_COMPILER)}
[ -n "$host_cxx" ] || host_cxx=$(cache_var CMAKE_CXX_COMPILER)

mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
exe=$out/aare_cf_cuda_test

# --- compile ----------------------------------------------------------------------------------
# The flags: aare's own src/Makefile recipe for this file
# (-Xptxas=-v -std=c++17 -O3 --extended-lambda, AARE_LOG_LEVEL, -laare_core -lfmt), with -arch=sm_90
# for the H200 and the kit's paths; -DNDEBUG as in the kit's Release build of libaare_core.a.
# -Xptxas=-v only logs the kernel's registers and shared memory into the build log.
cmd=("$NVCC" -Xptxas=-v -std=c++17 -O3 -DNDEBUG "-arch=sm_$arch" --extended-lambda
     "-DAARE_LOG_LEVEL=aare::logERROR")
[ -z "$host_cxx" ] || cmd+=(-ccbin "$host_cxx")
cmd+=("-I$aare_dir/include" "-I$fmt_inc" "$src" -o "$exe.tmp" "$lib_core" "$lib_fmt")
cmd_line=$(printf '%q ' "${cmd[@]}")
stale=0
if [ ! -x "$exe" ] || [ "$(cat "$exe.cmd" 2>/dev/null || true)" != "$cmd_line" ]; then
    stale=1
elif [ -n "$(find "$src" "$lib_core" "$lib_fmt" "$aare_dir/include" "$fmt_inc" -newer "$exe" -type f -print -quit)" ]; then
    stale=1
fi
if [ $stale = 1 ]; then
    say "compiling $(basename "$src") -> $exe (log: $exe.build.log)"
    t0=$(date +%s)
    if ! "${cmd[@]}" >"$exe.build.log" 2>&1; then
        grep -n "error" "$exe.build.log" | head -20 >&2 || tail -20 "$exe.build.log" >&2
        die "compiling the harness failed (command: $cmd_line)" "see $exe.build.log" 1
    fi
    mv -f "$exe.tmp" "$exe"
    printf '%s' "$cmd_line" >"$exe.cmd"
    say "compiled in $(( $(date +%s) - t0 )) s"
else
    say "up to date: $exe"
fi

# --- inputs -----------------------------------------------------------------------------------
stamp="generator=1 rows=400 cols=400 pedestal_frames=$n_ped data_frames=$n_data seed=$seed"
if [ -f "$out/pedestal.npy" ] && [ -f "$out/data.npy" ] && [ "$(cat "$out/inputs.stamp" 2>/dev/null || true)" = "$stamp" ]; then
    say "inputs up to date: $out/pedestal.npy, $out/data.npy ($stamp)"
else
    "$PYTHON" -c "import numpy" 2>/dev/null || die "$PYTHON cannot import numpy" "set PYTHON= to an interpreter with numpy" 1
    need_mb=$(( (2 * n_ped + n_data) * 320000 / 1000000 ))
    free_mb=$(df -Pm "$out" | awk 'NR==2 {print $4}')
    [ -z "$free_mb" ] || [ "$free_mb" -gt "$need_mb" ] || die "the inputs need ${need_mb} MB, $out has ${free_mb} MB free" "pass an OUT_DIR on a larger disk" 1
    rm -f "$out/inputs.stamp"
    say "writing ${need_mb} MB of inputs into $out ($stamp)"
    "$PYTHON" - "$out" "$n_ped" "$n_data" "$seed" <<'EOF' || die "writing the inputs failed" "" 1
# Synthetic 400x400 uint16 frames, deterministic for a seed. Pedestal N(2000, 100) ADU per pixel,
# noise sigma U(8, 20) ADU per pixel; each data frame gets Poisson(100) photons of N(250, 10) ADU,
# each shared over its 3x3 neighbourhood by a Gaussian charge cloud (sigma 0.5 px) at a uniform
# sub-pixel spot, centred at rows/cols 1..398. pedestal.npy: n_ped dark frames. data.npy: the same
# n_ped dark frames, then n_data photon frames (the harness seeks the data file to frame n_ped).
import math, os, sys, time
import numpy as np

out, n_ped, n_data, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows, cols, chunk = 400, 400, 100
t0 = time.time()
rng = np.random.default_rng(seed)
ped = rng.normal(2000.0, 100.0, (rows, cols)).astype(np.float32)
sig = rng.uniform(8.0, 20.0, (rows, cols)).astype(np.float32)
erf = np.vectorize(math.erf, otypes=[np.float64])
k = np.array([-1.0, 0.0, 1.0])


def shares(off):
    """(n,) sub-pixel offsets -> (n, 3) charge fractions of pixels -1, 0, +1, summing to 1."""
    s = 0.5 * math.sqrt(2.0)
    f = erf((k + 0.5 - off[:, None]) / s) - erf((k - 0.5 - off[:, None]) / s)
    return f / f.sum(axis=1, keepdims=True)


tmp_p, tmp_d = os.path.join(out, "pedestal.npy.tmp"), os.path.join(out, "data.npy.tmp")
pf = np.lib.format.open_memmap(tmp_p, mode="w+", dtype="<u2", shape=(n_ped, rows, cols))
df = np.lib.format.open_memmap(tmp_d, mode="w+", dtype="<u2", shape=(n_ped + n_data, rows, cols))
d = np.array([-1, 0, 1])
n_photons = 0
for start in range(0, n_ped + n_data, chunk):
    stop = min(start + chunk, n_ped + n_data)
    m = stop - start
    fr = ped + sig * rng.standard_normal((m, rows, cols), dtype=np.float32)
    if stop > n_ped:  # photons only in the frames after the dark prefix
        j0 = max(start, n_ped) - start
        counts = rng.poisson(100, m - j0)
        n = int(counts.sum())
        n_photons += n
        f_idx = np.repeat(np.arange(j0, m), counts)
        r = rng.integers(1, rows - 1, n)
        c = rng.integers(1, cols - 1, n)
        e = rng.normal(250.0, 10.0, n)
        w = shares(rng.uniform(-0.5, 0.5, n))[:, :, None] * shares(rng.uniform(-0.5, 0.5, n))[:, None, :]
        flat = (f_idx[:, None, None] * (rows * cols) + (r[:, None, None] + d[None, :, None]) * cols
                + (c[:, None, None] + d[None, None, :]))
        fr += np.bincount(flat.ravel(), weights=(w * e[:, None, None]).ravel(),
                          minlength=m * rows * cols).reshape(m, rows, cols).astype(np.float32)
    frames = np.clip(np.rint(fr), 0, 65535).astype("<u2")
    df[start:stop] = frames
    if start < n_ped:
        pf[start:min(stop, n_ped)] = frames[: min(stop, n_ped) - start]
pf.flush(); df.flush()
del pf, df
os.replace(tmp_p, os.path.join(out, "pedestal.npy"))
os.replace(tmp_d, os.path.join(out, "data.npy"))
print(f"aare_harness: wrote pedestal.npy ({n_ped} dark frames) and data.npy ({n_ped} dark + {n_data} "
      f"photon frames, {n_photons} photons, {n_photons / n_data:.1f} per frame) in {time.time() - t0:.1f} s",
      file=sys.stderr)
EOF
    printf '%s\n' "$stamp" >"$out/inputs.stamp"
fi

# --- the command line -------------------------------------------------------------------------
# argv: pedestal file, data file, pedestal frames, data frames, nsigma (the harness's own order)
printf '%q %q %q %q %q %q\n' "$exe" "$out/pedestal.npy" "$out/data.npy" "$n_ped" "$n_data" "$nsigma"
