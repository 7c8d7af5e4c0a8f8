#!/bin/sh
# Issue 34's GPU check, prepared to run once on a GPU machine that has PyTorch but no Ray and
# reaches no package registry (the device machine: python3 3.12 with torch 2.11).
#
# It installs the offline bundle (made beforehand with `make offline-bundle`, carried in dist/)
# into a venv over the image's Python (--system-site-packages: torch, numpy, scipy, pandas and
# pyarrow come from the image), with pip's index off, then runs `fluid bench gpu --out DIR` from
# outside the checkout (so every process imports the installed Fluid) and, if that worked,
# `fluid simulate --validate` on the packing points it measured.
#
# Usage: experiments/gpu_check.sh [OUT_DIR]   (default: $OUT, else ./gpu-check)
#   BUNDLE=dist/fluid-offline-py3.12.tar.xz  PYTHON=python3  BENCH_TIMEOUT=540 (seconds)
set -eu
out=$(mkdir -p "${1:-${OUT:-gpu-check}}" && cd "${1:-${OUT:-gpu-check}}" && pwd)
bundle=$(pwd)/${BUNDLE:-dist/fluid-offline-py3.12.tar.xz}
python=${PYTHON:-python3}
work=$(mktemp -d /tmp/fluid-gpu-check-XXXXXX)
log() { echo "[gpu_check $(date +%H:%M:%S)] $*" >&2; }

nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv \
    >"$out/nvidia-smi.csv" 2>&1 || log "nvidia-smi failed (see nvidia-smi.csv)"
log "installing $bundle into a venv over $python"
tar -xf "$bundle" -C "$work"
"$python" -m venv --system-site-packages "$work/venv"
PIP_CONFIG_FILE=/dev/null PYTHON="$work/venv/bin/python" "$work"/fluid-offline-py*/install.sh \
    -q --no-warn-script-location 2>&1 | tail -5 >&2
"$work/venv/bin/python" -m pip freeze >"$out/pip-freeze.txt" 2>/dev/null || true
log "fluid bench gpu (at most ${BENCH_TIMEOUT:-540} s)"
cd "$work"
status=0
PYTHONUNBUFFERED=1 timeout "${BENCH_TIMEOUT:-540}" "$work/venv/bin/fluid" bench gpu \
    --out "$out" >"$out/table.txt" 2>"$out/bench.log" || status=$?
tail -40 "$out/bench.log" >&2
cat "$out/table.txt"
if [ "$status" -eq 0 ] && [ -f "$out/packing.json" ]; then
    timeout 60 "$work/venv/bin/fluid" simulate --validate --references "$out/packing.json" \
        >"$out/validate.txt" 2>&1 || log "validate failed or timed out (validate.txt)"
    tail -15 "$out/validate.txt"
fi
log "MPS processes left: $(pgrep -c -f nvidia-cuda-mps || true); bench exit $status"
exit "$status"
