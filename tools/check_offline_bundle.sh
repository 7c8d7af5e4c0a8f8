#!/bin/sh
# Check an offline bundle the way a GPU node uses it: a fresh venv of PYTHON holding only torch
# and the packages the bundle assumes on the image, the bundle's install.sh with pip's index off
# (and no pip configuration, so no local wheel folder either), then `fluid bench gpu --smoke`.
# Usage: tools/check_offline_bundle.sh BUNDLE.tar.xz [PYTHON] ['ASSUMED PACKAGES'] [TORCH]
set -eu
bundle=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
python=${2:-python3}
assume=${3:-numpy scipy pandas pyarrow}
torch=${4:-torch}
work=$(mktemp -d /tmp/fluid-bundle-check-XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "== a fresh venv with torch and: $assume (from the ordinary index: the GPU image's part)"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$torch" $assume
echo "== install.sh, index off, no pip configuration"
tar -xf "$bundle" -C "$work"
PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_CONSTRAINT= PYTHON="$work/venv/bin/python" \
    "$work"/fluid-offline-py*/install.sh -q
echo "== what the venv holds"
"$work/venv/bin/python" -m pip list --format=freeze | grep -iE '^(fluid-tune|ray|torch)=='
if "$work/venv/bin/python" -c "import ray.rllib" 2>/dev/null; then
    echo "ray.rllib is still there" >&2; exit 1
fi
echo "== fluid bench gpu --smoke from the bundle's install"
cd "$work" && "$work/venv/bin/fluid" bench gpu --smoke --json >"$work/smoke.json"
"$work/venv/bin/python" -c "
import json; s = json.load(open('$work/smoke.json')); t = s['tuning']
print('smoke: plain %.1f s, fluid %.1f s, best lr %s, %d packing point(s)' % (
    t['plain']['wall_s'], t['fluid']['wall_s'], t['fluid']['best_config']['lr'],
    len(s['packing']['points'])))"
echo "offline bundle check: ok"
