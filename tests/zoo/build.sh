#!/usr/bin/env bash
# Builds the zoo (tests/zoo/README.md) into OUTDIR, every program in parallel, one log each.
#   bash tests/zoo/build.sh OUTDIR [PROGRAM...]      (default: every program of tests/zoo)
# Exits non-zero, naming each failed program and printing its log, when any build fails; the
# others are still built.
#
# Environment (all optional):
#   NVCC             the compiler (default: nvcc on PATH, else $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc)
#   ZOO_ARCH         the GPU architecture (default sm_90, the H200)
#   ZOO_NVRTC_INC    a folder holding nvrtc.h      (default: nvcc's include folder, then pip's nvidia wheels)
#   ZOO_NVRTC_LIB    the libnvrtc.so[.N] file      (default: nvcc's library folders, pip's wheels, ldconfig)
#   ZOO_LIBCUDA      the libcuda.so[.1] file to link (default: the toolkit's stubs, then the driver's, ldconfig)
# no_nvtx compiles without nvrtc.h or cuda.h too (it declares the few functions it uses), but it
# needs the NVRTC library and libcuda to link.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: tests/zoo/build.sh OUTDIR [PROGRAM...]}
shift
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
all=(no_nvtx nvtx_domain multi_kernel threads device_graph host_bound
     queue_fill pageable graph_block turns pipeline small_calls two_threads daq_loop)
progs=("$@")
[ ${#progs[@]} -eq 0 ] && progs=("${all[@]}")

nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
    for c in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-/nonexistent}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
        if [ -n "$c" ] && [ -x "$c" ]; then nvcc=$c; break; fi
    done
fi
if [ -z "$nvcc" ]; then echo "build.sh: no nvcc (set NVCC or put nvcc on PATH)" >&2; exit 2; fi
arch=${ZOO_ARCH:-sm_90}
echo "build.sh: $("$nvcc" --version | tail -n 2 | head -n 1) ($nvcc), -arch=$arch, into $out"

# nvcc's own include and library folders, as it reports them
dry=$(cd "$out" && echo 'int main(){return 0;}' > .zoo_probe.cu && "$nvcc" --dryrun .zoo_probe.cu -o .zoo_probe 2>&1; rm -f .zoo_probe.cu)
inc_dirs=$(printf '%s\n' "$dry" | sed -n 's/^#\$ INCLUDES=//p' | grep -o -- '-I[^" ]*' | sed 's/^-I//')
lib_dirs=$(printf '%s\n' "$dry" | sed -n 's/^#\$ LIBRARIES=//p' | grep -o -- '-L[^" ]*' | sed 's/^-L//')
top=$(printf '%s\n' "$dry" | sed -n 's/^#\$ TOP=//p' | head -n 1)
[ -n "$top" ] && { inc_dirs="$inc_dirs $top/include"; lib_dirs="$lib_dirs $top/lib64 $top/lib64/stubs $top/lib $top/lib/stubs"; }
# pip's NVIDIA wheels (nvidia-cuda-nvrtc: nvidia/cu13/{include,lib} or nvidia/cuda_nvrtc/{include,lib})
py_dirs=""
for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    py_dirs=$("$py" - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()] + [p for p in sys.path if p.endswith("-packages")])
for r in sorted(roots):
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*"))):
        if os.path.isdir(d):
            print(d)
EOF
)
    [ -n "$py_dirs" ] && break
done

find_first() {  # find_first NAME DIR... : the first DIR/NAME that exists
    local name=$1 d
    shift
    for d in "$@"; do
        [ -n "$d" ] && [ -e "$d/$name" ] && { echo "$d/$name"; return 0; }
    done
    return 1
}
ldconfig_lib() {  # ldconfig_lib REGEX : the first library path ldconfig knows for a soname matching REGEX
    command -v ldconfig >/dev/null 2>&1 || return 1
    ldconfig -p 2>/dev/null | awk -v re="$1" '$1 ~ re && /x86-64|x86_64|aarch64|AArch64/ {print $NF; exit}' | grep .
}

# ---- NVRTC (no_nvtx)
nvrtc_inc=${ZOO_NVRTC_INC:-}
if [ -z "$nvrtc_inc" ]; then
    wheel_incs=$(for d in $py_dirs; do echo "$d/include"; done)
    h=$(find_first nvrtc.h $inc_dirs $wheel_incs /usr/local/cuda/include /usr/include) && nvrtc_inc=$(dirname "$h")
fi
nvrtc_lib=${ZOO_NVRTC_LIB:-}
if [ -z "$nvrtc_lib" ]; then
    wheel_libs=$(for d in $py_dirs; do echo "$d/lib"; done)
    for name in libnvrtc.so libnvrtc.so.13 libnvrtc.so.12; do
        nvrtc_lib=$(find_first "$name" $lib_dirs /usr/local/cuda/lib64 $wheel_libs) && break
        nvrtc_lib=""
    done
    [ -z "$nvrtc_lib" ] && nvrtc_lib=$(ldconfig_lib '^libnvrtc[.]so([.][0-9]+)?$') || true
fi
# ---- libcuda (no_nvtx: the driver API)
libcuda=${ZOO_LIBCUDA:-}
if [ -z "$libcuda" ]; then
    libcuda=$(find_first libcuda.so $lib_dirs /usr/local/cuda/lib64/stubs /usr/lib/x86_64-linux-gnu /usr/lib64 \
                  /usr/local/nvidia/lib64 /usr/lib/wsl/lib) ||
    libcuda=$(find_first libcuda.so.1 /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 /usr/lib/wsl/lib) ||
    libcuda=$(ldconfig_lib '^libcuda[.]so([.]1)?$') || libcuda=""
fi
echo "build.sh: nvrtc.h: ${nvrtc_inc:-not found (no_nvtx declares the API itself)}"
echo "build.sh: NVRTC library: ${nvrtc_lib:-NOT FOUND}"
echo "build.sh: libcuda: ${libcuda:-NOT FOUND}"

common=(-O2 "-arch=$arch" -lineinfo -std=c++17 -I"$here")
flags_for() {  # flags_for PROGRAM : prints one flag a line
    case $1 in
    no_nvtx)  # -l:FILE links a library by its file name (a wheel has only libnvrtc.so.13)
        [ -n "$nvrtc_inc" ] && echo "-I$nvrtc_inc"
        echo "-L$(dirname "$nvrtc_lib")"; echo "-l:$(basename "$nvrtc_lib")"
        echo "-Xlinker"; echo "-rpath=$(dirname "$nvrtc_lib")"
        echo "-L$(dirname "$libcuda")"; echo "-l:$(basename "$libcuda")"
        echo "-ldl" ;;
    nvtx_domain|queue_fill|pageable|graph_block|turns|pipeline|small_calls|daq_loop) echo "-ldl" ;;
    threads|two_threads) echo "-lpthread"; echo "-ldl" ;;
    device_graph) echo "-rdc=true"; echo "-lcudadevrt" ;;
    esac
}

since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
pids=()
names=()
t0=$(date +%s.%N)
for p in "${progs[@]}"; do
    src="$here/$p.cu"
    log="$out/build_$p.log"
    rm -f "$out/$p"  # never leave an older binary behind a failed build
    if [ ! -f "$src" ]; then echo "build.sh: no such program: $p ($src)" > "$log"; fi
    if [ "$p" = no_nvtx ] && { [ -z "$nvrtc_lib" ] || [ -z "$libcuda" ]; }; then
        echo "build.sh: no_nvtx needs the NVRTC library and libcuda to link: set ZOO_NVRTC_LIB / ZOO_LIBCUDA" > "$log"
        ( exit 1 ) & pids+=($!); names+=("$p"); continue
    fi
    if [ ! -f "$src" ]; then ( exit 1 ) & pids+=($!); names+=("$p"); continue; fi
    mapfile -t extra < <(flags_for "$p")
    cmd=("$nvcc" "${common[@]}" "$src" -o "$out/$p" ${extra[@]+"${extra[@]}"})
    (
        s=$(date +%s.%N)
        echo "+ ${cmd[*]}"
        "${cmd[@]}"
        rc=$?
        echo "rc=$rc seconds=$(since "$s")"
        exit $rc
    ) > "$log" 2>&1 &
    pids+=($!)
    names+=("$p")
done

failed=()
for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
        echo "build.sh: ok      ${names[$i]}  ($(grep -o 'seconds=.*' "$out/build_${names[$i]}.log" | tail -n 1))"
    else
        failed+=("${names[$i]}")
        echo "build.sh: FAILED  ${names[$i]}  (log: $out/build_${names[$i]}.log)" >&2
        sed 's/^/    /' "$out/build_${names[$i]}.log" >&2
    fi
done
echo "build.sh: $((${#progs[@]} - ${#failed[@]})) of ${#progs[@]} built in $(since "$t0") s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "build.sh: FAILED: ${failed[*]}" >&2
    exit 1
fi
exit 0
