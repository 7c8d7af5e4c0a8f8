#!/bin/sh
# The GPU check, prepared to run once on a GPU machine that has PyTorch but no Ray and
# reaches no package registry (the device machine: python3 3.12 with torch 2.11; 600 s a command).
#
# Budget of --quick (fits 300 s on one H200; estimates, the tuning part's share not yet timed):
#   gpu + bundle ~10 s, install ~45 s, bench <= 210 s (BENCH_TIMEOUT; the tuning part alone,
#   about 3 of the full bench's 7 minutes), evidence + summary ~10 s: ~275 s in all.
# The full form: install ~45 s, bench <= 540 s (about 7 minutes on an H100), validate <= 60 s.
#
# Steps, in this order, each announced as `[gpu_check HH:MM:SS] step: NAME: ...`; the first that
# fails prints `gpu_check: FAILED at NAME: MESSAGE` and the script exits non-zero:
#   gpu       nvidia-smi on PATH and listing a GPU (first, so nothing is installed without one)
#   bundle    the offline bundle (made beforehand with `make offline-bundle`, carried in dist/)
#   install   a venv over the image's Python (--system-site-packages: torch, numpy, scipy, pandas
#             and pyarrow come from the image), the bundle installed with pip's index off
#   sampler   experiments/mps_evidence.py in the background: every 2 s, what each MPS daemon
#             and NVML say about their clients, and the trials' result rows (OUT/mps/)
#   bench     `fluid bench gpu --out OUT` from outside the checkout (so every process imports
#             the installed Fluid); --quick: `--parts tuning`, since the packed trials are what
#             the evidence is about and the bench has no option to shorten the tuning job
#   evidence  the sampler stopped (it copies each daemon's control.log once more)
#   summary   OUT/mps-summary.json, printed: packed trial processes, and how many of them were
#             clients of a live daemon by the evidence (experiments/mps_evidence.py summarize)
#   validate  (full form only) `fluid simulate --validate` on the packing points measured
# A bench that fails still gets its evidence and summary; the script then fails at bench.
#
# Usage: experiments/gpu_check.sh [--quick] [OUT_DIR]   (default: $OUT, else ./gpu-check)
#   BUNDLE=dist/fluid-offline-py3.12.tar.xz  PYTHON=python3
#   BENCH_TIMEOUT=540 (seconds; --quick: 210)  BENCH_ARGS= (more arguments for fluid bench gpu)
set -eu
usage() { sed -n '/^# Usage:/,/^set -eu/{/^set/d;s/^# \{0,1\}//;p;}' "$0"; }
quick=0
dir=${OUT:-gpu-check}
for arg in "$@"; do
    case $arg in
        --quick) quick=1 ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "gpu_check: unknown option $arg" >&2; usage >&2; exit 2 ;;
        *) dir=$arg ;;
    esac
done

step=setup
log() { echo "[gpu_check $(date +%H:%M:%S)] $*" >&2; }
fail() { echo "gpu_check: FAILED at $step: $*" >&2; exit 1; }
begin() { step=$1; shift; log "step: $step: $*"; }

repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir" || fail "cannot make the output directory $dir"
out=$(cd "$dir" && pwd)
bundle=${BUNDLE:-dist/fluid-offline-py3.12.tar.xz}
case $bundle in /*) ;; *) bundle=$(pwd)/$bundle ;; esac
python=${PYTHON:-python3}
if [ "$quick" -eq 1 ]; then
    bench_timeout=${BENCH_TIMEOUT:-210}
    bench_args="--parts tuning ${BENCH_ARGS:-}"
else
    bench_timeout=${BENCH_TIMEOUT:-540}
    bench_args=${BENCH_ARGS:-}
fi
sampler=

stop_sampler() {
    [ -n "$sampler" ] || return 0
    kill -TERM "$sampler" 2>/dev/null || :
    rc=0
    wait "$sampler" || rc=$?
    sampler=
    return "$rc"
}
# Whatever ends the script, the sampler must not outlive it.
trap 'stop_sampler >/dev/null 2>&1 || :' EXIT
trap 'exit 130' INT TERM

begin gpu "an NVIDIA GPU (nvidia-smi)"
command -v nvidia-smi >/dev/null 2>&1 || fail "no NVIDIA GPU: nvidia-smi not found on PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv \
    >"$out/nvidia-smi.csv" 2>&1 || fail "no NVIDIA GPU: nvidia-smi failed: $(tail -1 "$out/nvidia-smi.csv")"
gpus=$(($(wc -l <"$out/nvidia-smi.csv") - 1))
[ "$gpus" -ge 1 ] || fail "no NVIDIA GPU: nvidia-smi lists none"
tail -n +2 "$out/nvidia-smi.csv" >&2

begin bundle "unpacking $bundle"
[ -f "$bundle" ] || fail "no bundle at $bundle (make offline-bundle here, carry dist)"
work=$(mktemp -d /tmp/fluid-gpu-check-XXXXXX) || fail "mktemp failed"
tar -xf "$bundle" -C "$work" || fail "tar could not unpack $bundle"
set -- "$work"/fluid-offline-py*/install.sh
[ -x "$1" ] || fail "$bundle holds no fluid-offline-py*/install.sh"
installer=$1

begin install "the bundle into a venv over $python, index off (install.log)"
command -v "$python" >/dev/null 2>&1 || fail "$python not found"
"$python" -m venv --system-site-packages "$work/venv" >"$out/install.log" 2>&1 ||
    fail "$python -m venv failed: $(tail -1 "$out/install.log")"
venv_py=$work/venv/bin/python
rc=0
PIP_CONFIG_FILE=/dev/null PYTHON="$venv_py" "$installer" -q --no-warn-script-location \
    >>"$out/install.log" 2>&1 || rc=$?
tail -5 "$out/install.log" >&2
[ "$rc" -eq 0 ] || fail "install.sh exited with $rc (install.log)"
[ -x "$work/venv/bin/fluid" ] || fail "no fluid command in the venv after install.sh"
"$venv_py" -m pip freeze >"$out/pip-freeze.txt" 2>>"$out/install.log" ||
    fail "pip freeze failed in the new venv (install.log)"

begin sampler "experiments/mps_evidence.py every 2 s into $out/mps/"
# The bench's own TMPDIR holds its Ray storage (fluid-bench-gpu-*) and nothing else's, so the
# sampler reads that run's result rows only; Ray's sessions stay where Ray puts them by default
# (a longer path would overflow its Unix socket names).
bench_tmp=$work/tmp
ray_tmp=${RAY_TMPDIR:-/tmp}
mkdir -p "$out/mps" "$bench_tmp"
"$venv_py" "$repo/experiments/mps_evidence.py" sample --out "$out" --interval 2 \
    --storage "$bench_tmp" --ray-tmp "$ray_tmp/ray" >"$out/mps/sampler.log" 2>&1 &
sampler=$!
sleep 1
kill -0 "$sampler" 2>/dev/null ||
    fail "the sampler exited at once: $(tail -1 "$out/mps/sampler.log")"

begin bench "fluid bench gpu $bench_args --out $out (at most $bench_timeout s; bench.log, table.txt)"
cd "$work"
status=0
# $bench_args unquoted on purpose: it is a list of words.
# shellcheck disable=SC2086
PYTHONUNBUFFERED=1 TMPDIR=$bench_tmp RAY_TMPDIR=$ray_tmp \
    timeout "$bench_timeout" "$work/venv/bin/fluid" bench gpu $bench_args \
    --out "$out" >"$out/table.txt" 2>"$out/bench.log" || status=$?
tail -40 "$out/bench.log" >&2
cat "$out/table.txt"

begin evidence "stopping the sampler (a last copy of each control.log)"
rc=0
stop_sampler || rc=$?
[ "$rc" -eq 0 ] || fail "the sampler exited with $rc: $(tail -1 "$out/mps/sampler.log")"

begin summary "$out/mps-summary.json"
"$venv_py" "$repo/experiments/mps_evidence.py" summarize --out "$out" ||
    fail "experiments/mps_evidence.py summarize failed"

if [ "$status" -ne 0 ]; then
    step=bench
    [ "$status" -ne 124 ] || fail "fluid bench gpu ran past $bench_timeout s (bench.log)"
    fail "fluid bench gpu exited with $status: $(tail -1 "$out/bench.log")"
fi

if [ "$quick" -eq 1 ]; then
    begin validate "skipped (--quick measures no packing)"
else
    begin validate "fluid simulate --validate on $out/packing.json (validate.txt)"
    [ -f "$out/packing.json" ] || fail "the bench wrote no packing.json"
    timeout 60 "$work/venv/bin/fluid" simulate --validate --references "$out/packing.json" \
        >"$out/validate.txt" 2>&1 || fail "validate failed or ran past 60 s (validate.txt)"
    tail -15 "$out/validate.txt"
fi
log "done; MPS processes left: $(pgrep -c -f nvidia-cuda-mps || :)"
