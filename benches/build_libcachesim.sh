#!/usr/bin/env bash
# Build libCacheSim's mrcProfiler (its SHARDS / exact splay-tree miss-rate-curve profiler) for
# benches/mrc.py. The libcachesim wheel on PyPI does not expose the profiler, but its source
# distribution carries the whole C library: fetch that with pip, build only the mrcProfiler
# target with CMake, and leave the binary at bench-out/libcachesim/mrcProfiler.
# Needs cmake, a C/C++ compiler, GLib and zstd headers (apt-get install cmake g++
# libglib2.0-dev libzstd-dev; installed here when running as root). Takes a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${LIBCACHESIM_VERSION:-0.3.5}"
OUT=bench-out/libcachesim
PY="${PY:-.venv/bin/python}"
if [ -x "$OUT/mrcProfiler" ]; then echo "$OUT/mrcProfiler exists"; exit 0; fi
if ! pkg-config --exists glib-2.0 || ! command -v cmake >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends cmake g++ pkg-config libglib2.0-dev libzstd-dev >/dev/null
  else
    echo "need cmake and GLib headers: sudo apt-get install cmake g++ pkg-config libglib2.0-dev libzstd-dev" >&2
    exit 1
  fi
fi
mkdir -p "$OUT/src"
"$PY" -m pip download -q "libcachesim==$VERSION" --no-binary :all: --no-deps -d "$OUT/src"
tar xzf "$OUT/src/libcachesim-$VERSION.tar.gz" -C "$OUT/src"
SRC="$OUT/src/libcachesim-$VERSION/src/libCacheSim"
cmake -S "$SRC" -B "$SRC/_build" -DCMAKE_BUILD_TYPE=Release -DENABLE_TESTS=OFF >/dev/null
make -C "$SRC/_build" -j"$(nproc)" mrcProfiler >/dev/null
cp "$SRC/_build/bin/mrcProfiler" "$OUT/mrcProfiler"
echo "built $OUT/mrcProfiler (libCacheSim $VERSION)"
