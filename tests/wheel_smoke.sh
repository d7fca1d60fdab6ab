#!/usr/bin/env bash
# The wheel as a user gets it (issue 24): install WHEEL into a fresh virtual environment of the
# lowest supported Python, outside the checkout, and from an empty directory run what a new
# user runs first. Fails on the first command that fails; prints each step and its time.
#
# Usage: LOW_PYTHON=python3.9 bash tests/wheel_smoke.sh target/wheels/cachecolor-*.whl
# Called by `make test-wheel` (part of `make test`). Needs network access to PyPI for the
# wheel's dependencies (pip's cache makes later runs fast), a C compiler and qemu-user or
# valgrind (for `cachecolor demo`'s capture).
set -euo pipefail

wheel=$(realpath "${1:?usage: wheel_smoke.sh WHEEL}")
py=${LOW_PYTHON:-}
if [ -z "$py" ]; then
    for v in 9 10 11 12 13; do
        for c in "$HOME"/.pyenv/versions/3.$v.*/bin/python3.$v "$(command -v python3.$v 2>/dev/null)"; do
            if [ -n "$c" ] && [ -x "$c" ] && "$c" -c "import venv" >/dev/null 2>&1; then py=$c; break 2; fi
        done
    done
fi
if [ -z "$py" ]; then
    echo "wheel_smoke: no python3.9 .. python3.13 that runs (set LOW_PYTHON)" >&2
    exit 1
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/cachecolor-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
case "$work" in "$repo"/*) echo "wheel_smoke: $work is inside the checkout" >&2; exit 1 ;; esac

step() {
    local t0=$SECONDS
    echo "== $*"
    "$@"
    echo "   ($((SECONDS - t0)) s)"
}

step "$py" -m venv "$work/venv"
step "$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
mkdir "$work/empty"
cd "$work/empty"
export PATH="$work/venv/bin:$PATH"
# Nothing below may find the checkout: not the working directory, not a path in the package.
step python -c "import sys, cachecolor; print(sys.version.split()[0], cachecolor.__version__, cachecolor.__file__); assert '$repo' not in cachecolor.__file__"
step cachecolor --version
step cachecolor demo --out demo-out
test -s demo-out/results.json
art=$(cachecolor examples rocs/art.toml)
case "$art" in "$repo"/*) echo "wheel_smoke: bundled example $art is in the checkout" >&2; exit 1 ;; esac
step cachecolor simulate "$art" --policy rocs --json rocs.json
python - <<'PY'
import json
doc = json.load(open("rocs.json"))
assert doc["processes"], "no processes in the rocs run"
print("   rocs:", ", ".join(f"{p['name']} ipc {p['ipc']:.3f}" for p in doc["processes"]))
PY
step cachecolor oscache report --out oscache-out --references 20000
ls oscache-out | head -5
# The working directory holds only what the commands wrote.
ls -A
echo "wheel_smoke: ok ($(basename "$wheel") under $($py --version 2>&1))"
