# Sourced by the GPU-only shell scripts (scripts/zoo_trace.sh, scripts/device_probe_checks.sh): their usage
# from their header comment, and one Error/Hint refusal, before any work, where there is no GPU or no nsys.

# gpu_script_usage SCRIPT SYNOPSIS: the synopsis, then the script's header comment (its second line on)
gpu_script_usage() {
    echo "usage: $2  (GPU only: needs an NVIDIA GPU and Nsight Systems)"
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"
}

# require_gpu_and_nsys NAME: exit 1 with one Error line and a Hint unless nsys and an NVIDIA GPU are here
require_gpu_and_nsys() {
    if ! command -v nsys >/dev/null 2>&1 || ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "Error: $1 needs an NVIDIA GPU and Nsight Systems: $(command -v nsys >/dev/null 2>&1 \
            && echo 'no NVIDIA GPU or driver (nvidia-smi -L failed)' || echo 'nsys is not on PATH')" >&2
        echo "Hint: run it on a GPU machine with nsys on PATH" >&2
        exit 1
    fi
}
