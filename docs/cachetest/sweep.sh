#!/usr/bin/env bash
# The full Cachetest sweep of docs/cachetest.md: L1, L2, L3 x naive, contiguous, thp, 20 trials
# of 25 ms per working set, 16 working sets over 0.5-1.5x each level's sysfs size; then the plot.
# Usage: [LEVELS="L1 L2 L3"] docs/cachetest/sweep.sh [OUTDIR]   (needs root for the contiguous buffers' frame numbers)
set -euo pipefail
out=${1:-docs/cachetest}
cc=${CACHECOLOR:-.venv/bin/cachecolor}
mkdir -p "$out"
cat /proc/loadavg > "$out/loadavg-before-${LEVELS:-all}.txt"
for level in ${LEVELS:-L1 L2 L3}; do
  for buffer in naive contiguous thp; do
    "$cc" bench --level "$level" --buffer "$buffer" --pattern uniform --trials 20 --duration-ms 25 \
      --json "$out/$level-$buffer.json" --quiet > "$out/$level-$buffer.txt"
  done
done
cat /proc/loadavg > "$out/loadavg-after-${LEVELS:-all}.txt"
"$cc" bench --replot "$out"/L*-*.json --plot "$out/sweep.png"
