"""A program's capture region chosen by phase, SimPoint-style (Sherwood, Perelman, Hamerly and
Calder, "Automatically characterizing large scale program behavior", ASPLOS 2002; Hamerly et
al., "SimPoint 3.0", JILP 2005).

The papers measured programs past their initialisation (ROCS section 6.2 profiled after
skipping 4 billion cycles); a fixed skip is a guess, and for ``zstd -19`` a wrong one (its
first 70 M instructions fill its tables: 2.000 records per instruction, 99.9% L1D misses). So
the region is chosen from the program's behaviour:

1. A profiling run (the QEMU plugin's ``bbv=``, ``crates/capture/qemu-plugin``) counts, for
   every interval of ``interval`` instructions up to ``horizon``, the instructions executed in
   each basic block: one basic-block vector (BBV) per interval.
2. Each vector is normalised to sum 1 and randomly projected to 15 dimensions (SimPoint 3.0
   section 3.2; the projection's seed is fixed).
3. k-means (k-means++ seeding, 5 fixed seeds per k, the lowest distortion kept) for k = 1 ..
   ``max_k``; k is the smallest whose BIC reaches 90% of the range of the BIC scores (SimPoint's
   rule, section 3.3).
4. The region starts at the interval nearest the centroid of the *dominant* cluster (the one
   with the most intervals: the program's steady state), so one region represents the phase
   the program spends most of its time in; the others' weights are recorded with it.

Everything is deterministic for a given vector file. ``choose`` returns the choice as a dict
(stored in the workload's metadata and shown by ``cachecolor workloads info``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

#: SimPoint 3.0's defaults: 15 projected dimensions, k up to 10, the BIC threshold.
DIMENSIONS = 15
MAX_K = 10
BIC_THRESHOLD = 0.9
SEED = 1


def read_bbv(path: Path) -> list[dict[int, int]]:
    """The vectors of a SimPoint ``.bb`` file: one {block id: instructions} per interval."""
    out: list[dict[int, int]] = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("T"):
                continue
            v: dict[int, int] = {}
            for part in line[1:].split():
                _, bid, cnt = part.split(":")
                v[int(bid)] = int(cnt)
            out.append(v)
    return out


def project(vectors: list[dict[int, int]], dims: int = DIMENSIONS, seed: int = SEED) -> np.ndarray:
    """Each vector normalised to sum 1, projected onto ``dims`` random directions (entries
    uniform in [-1, 1], one row per block id, from ``seed``)."""
    top = max((max(v) for v in vectors if v), default=0)
    proj = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(top + 1, dims))
    x = np.zeros((len(vectors), dims))
    for i, v in enumerate(vectors):
        if not v:
            continue
        ids = np.fromiter(v.keys(), dtype=np.int64, count=len(v))
        w = np.fromiter(v.values(), dtype=np.float64, count=len(v))
        x[i] = (w / w.sum()) @ proj[ids]
    return x


def kmeans(x: np.ndarray, k: int, seed: int, iterations: int = 100) -> tuple[np.ndarray, np.ndarray, float]:
    """Lloyd's k-means with k-means++ seeding: (labels, centroids, distortion: the sum of
    squared distances to the assigned centroid)."""
    rng = np.random.default_rng(seed)
    n = len(x)
    centres = [x[rng.integers(n)]]
    for _ in range(1, k):
        d2 = np.min(((x[:, None, :] - np.array(centres)[None]) ** 2).sum(-1), axis=1)
        total = d2.sum()
        centres.append(x[rng.choice(n, p=d2 / total)] if total > 0 else x[rng.integers(n)])
    c = np.array(centres)
    labels = np.zeros(n, dtype=np.int64)
    for it in range(iterations):
        d = ((x[:, None, :] - c[None]) ** 2).sum(-1)
        new = d.argmin(1)
        if it and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            if (labels == j).any():
                c[j] = x[labels == j].mean(0)
    dist = float(((x - c[labels]) ** 2).sum())
    return labels, c, dist


def bic(x: np.ndarray, labels: np.ndarray, centres: np.ndarray) -> float:
    """The Bayesian information criterion of a clustering under the spherical-Gaussian model
    (Pelleg and Moore, X-means, 2000: the score SimPoint uses)."""
    n, d = x.shape
    k = len(centres)
    sq = float(((x - centres[labels]) ** 2).sum())
    if n <= k:
        return float("-inf")
    var = sq / (d * (n - k))
    if var <= 0:
        var = 1e-300
    ll = 0.0
    for j in range(k):
        nj = int((labels == j).sum())
        if nj == 0:
            continue
        ll += nj * np.log(nj) - nj * np.log(n) - nj * d / 2 * np.log(2 * np.pi * var) - (nj - 1) * d / 2
    params = k * (d + 1)
    return float(ll - params / 2 * np.log(n))


def choose(vectors: list[dict[int, int]], interval: int, *, max_k: int = MAX_K,
           seed: int = SEED) -> dict[str, Any]:
    """The region choice for ``vectors`` (one per ``interval`` instructions): the start (in
    instructions) of the interval nearest the dominant cluster's centroid, with k, each
    cluster's weight (its share of the intervals), the chosen interval's index and each
    interval's cluster (``labels``: a string of digits, the program's phases in order)."""
    if not vectors:
        raise ValueError("no basic-block vectors: the program ran less than one interval")
    x = project(vectors, seed=seed)
    n = len(x)
    fits = []
    for k in range(1, min(max_k, n) + 1):
        best = min((kmeans(x, k, seed * 1000 + s) for s in range(5)), key=lambda r: r[2])
        fits.append((k, best, bic(x, best[0], best[1])))
    scores = np.array([f[2] for f in fits])
    finite = scores[np.isfinite(scores)]
    lo, hi = (finite.min(), finite.max()) if len(finite) else (0.0, 0.0)
    k, (labels, centres, _), _ = next(f for f in fits if np.isfinite(f[2]) and f[2] >= lo + BIC_THRESHOLD * (hi - lo)) \
        if len(finite) else fits[0]
    counts = np.bincount(labels, minlength=k)
    dominant = int(counts.argmax())
    members = np.flatnonzero(labels == dominant)
    nearest = int(members[((x[members] - centres[dominant]) ** 2).sum(1).argmin()])
    return {
        "method": "simpoint",
        "interval": int(interval),
        "intervals": int(n),
        "k": int(k),
        "weights": [round(float(c) / n, 4) for c in counts],
        "dominant_cluster": dominant,
        "chosen_interval": nearest,
        "skip": nearest * int(interval),
        "first_interval_cluster": int(labels[0]),
        # Each interval's cluster, one digit per interval in program order (k <= 10).
        "labels": "".join(str(int(v)) for v in labels),
        "projection_seed": int(seed),
    }


def choose_file(path: Path, interval: int, **kw: Any) -> Optional[dict[str, Any]]:
    """``choose`` on the vectors of a ``.bb`` file."""
    return choose(read_bbv(path), interval, **kw)
