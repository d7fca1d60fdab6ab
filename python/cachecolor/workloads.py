"""The workload suite: real, unmodified programs from Debian packages, captured in regions
(docs/workloads.md).

Contract:

- ``SUITE`` lists the programs. Each names the Debian packages it needs (installed on demand by
  ``make workloads`` / ``install()``; nothing is vendored), the command it runs, the input it
  reads -- generated here, deterministically, from a fixed seed -- and its capture region.
- A region is the papers' kind (ROCS section 6.2 profiled after skipping 4 billion cycles of
  initialisation): fast-forward ``skip`` instructions (the QEMU plugin's ``skip=`` argument: the
  whole program, all threads, counted per executed block, so within one block of it), chosen
  by phase (``choose_region``), then capture ``length`` instructions (``REGION_INSTRUCTIONS``,
  1 B, by default; instruction fetches, loads and stores; the program is killed there, or
  the region ends at its exit). The trace's exact instruction and record counts are measured
  and stored, not assumed.
- Traces live in a cache outside git: ``$CACHECOLOR_CACHE/workloads/NAME/`` (default
  ``~/.cache/cachecolor``): ``input/`` (generated), ``trace.cctrace`` and ``meta.json`` (command,
  package versions, region, record counts and the trace hash). A trace is rebuilt when missing
  or when its ``meta.json`` no longer matches the definition (command, region, versions).
- Captures are made reproducible where the program allows: address-space randomisation off
  (``setarch -R``), a fixed environment (``env -i`` with ``PYTHONHASHSEED=0``, ``LC_ALL=C``,
  one BLAS thread), a fixed working directory. The trace hash is the SHA-256 of the trace's
  blocks (everything after the header, whose metadata holds temporary paths), so two captures
  of the same records have the same hash. Multithreaded programs are the documented exception:
  the plugin sends each thread's records in chunks whose interleaving depends on the host's
  scheduling.
- A program that fails to install or crashes during capture is reported with its error and
  skipped; the rest of the suite is built.
- The OS-intensive programs (``find``, ``tar``, ``httpd``: ``capture="system"``) are captured
  full-system (``cachecolor.fullsys.capture_system``: the packaged kernel booted under
  qemu-system-x86_64, their input copied into the guest), so their traces hold the kernel's
  references beside the program's, every guest task labelled. Full-system capture has no
  fast-forward: their region starts at the program's exec (``skip`` is 0) and ends at its
  record cap or its exit. They are built by record then replay (``recorded_log``): a recording
  run (of the whole program) writes QEMU's record/replay log of the guest's nondeterministic events (``guest.rr``,
  kept beside the trace and keyed like it in ``replay.json``), and the trace is captured by
  replaying it, so a rebuild replays the same log and gives the same trace record for record
  (``-icount`` alone does not promise a deterministic guest: docs/capture.md
  "Reproducibility"). Their metadata records the log, the kernel booted (path, release,
  package, SHA-256), ``kernel_code: true``, the privileged share and the guest tasks. Without
  qemu-system, BusyBox or a kernel image they are reported with the missing piece and skipped.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from . import _output

META_VERSION = 1


def cache_dir() -> Path:
    """``$CACHECOLOR_CACHE`` or ``~/.cache/cachecolor``."""
    env = os.environ.get("CACHECOLOR_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "cachecolor"


# ---- deterministic inputs ------------------------------------------------------------------

_WORDS = (
    "the of and to in is was that for on with as by at from his her they this which have had "
    "cache page color memory line set way miss hit policy kernel thread process core chip "
    "array stream buffer pointer table index query record trace region program compiler "
    "interpreter database compression sort stencil matrix vector sparse dense block frame"
).split()


def _corpus(path: Path, size: int, seed: int) -> None:
    """Text with a Zipf-like word distribution, sentence breaks and some numbers: compressible
    like prose. Drawn in bulk (one ``choices`` call) so 16 MiB takes a second or two."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(len(_WORDS))]
    vocab = _WORDS + [str(n) for n in range(1000, 1300)] + ["the end.\n", "and so.\n"]
    weights += [0.002] * 300 + [0.05, 0.05]
    words = rng.choices(vocab, weights, k=size // 4)
    text = " ".join(words)
    while len(text) < size:
        text += " " + text[: size - len(text)]
    path.write_text(text[:size])


def _lines(path: Path, count: int, seed: int) -> None:
    rng = random.Random(seed)
    keys = [rng.getrandbits(30) for _ in range(count)]
    names = rng.choices(_WORDS, k=count)
    path.write_text("".join(f"{k:09d} {n} {k % 99991}\n" for k, n in zip(keys, names)))


def _sql(path: Path, rows: int, queries: int, seed: int) -> None:
    """A table and an index, then a mix of point lookups, range aggregates and joins."""
    rng = random.Random(seed)
    s = ["PRAGMA journal_mode=OFF;", "PRAGMA synchronous=OFF;", "BEGIN;",
         "CREATE TABLE item(id INTEGER PRIMARY KEY, cat INTEGER, name TEXT, price REAL);",
         "CREATE TABLE cat(id INTEGER PRIMARY KEY, label TEXT);"]
    s += [f"INSERT INTO cat VALUES({c}, '{rng.choice(_WORDS)}{c}');" for c in range(100)]
    # One statement fills the table (deterministic arithmetic, not sqlite's random()).
    s.append(f"INSERT INTO item WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {rows}) "
             "SELECT i, (i * 7919) % 100, 'item-' || i, ((i * 104729) % 10000) / 100.0 FROM n;")
    s += ["COMMIT;", "CREATE INDEX item_cat ON item(cat);", "CREATE INDEX item_price ON item(price);"]
    for _ in range(queries):
        r = rng.random()
        if r < 0.5:
            s.append(f"SELECT name, price FROM item WHERE id = {rng.randrange(rows)};")
        elif r < 0.8:
            lo = rng.random() * 99
            s.append(f"SELECT count(*), avg(price) FROM item WHERE price BETWEEN {lo:.2f} AND {lo + 1:.2f};")
        else:
            s.append(f"SELECT c.label, count(*) FROM item i JOIN cat c ON i.cat = c.id WHERE i.cat = {rng.randrange(100)} GROUP BY c.label;")
    path.write_text("\n".join(s) + "\n")


def _python_script(path: Path, seed: int) -> None:
    """A pure-Python workload: objects, dicts, strings, sorting, recursion."""
    path.write_text(f"""# generated by cachecolor.workloads (seed {seed})
import random
rng = random.Random({seed})
class Node:
    __slots__ = ("key", "left", "right")
    def __init__(self, key):
        self.key, self.left, self.right = key, None, None
def insert(root, key):
    if root is None:
        return Node(key)
    node = root
    while True:
        if key < node.key:
            if node.left is None:
                node.left = Node(key); return root
            node = node.left
        else:
            if node.right is None:
                node.right = Node(key); return root
            node = node.right
def depth(n):
    return 0 if n is None else 1 + max(depth(n.left), depth(n.right))
for rnd in range(40):
    root = None
    for _ in range(20000):
        root = insert(root, rng.random())
    counts = {{}}
    for i in range(50000):
        w = "w%d" % rng.randrange(5000)
        counts[w] = counts.get(w, 0) + i
    words = sorted(counts, key=counts.get)
    text = " ".join(words[:2000]).upper().split()
    print(rnd, depth(root), len(text))
""")


def _c_source(path: Path, functions: int, seed: int) -> None:
    """A self-contained C file (no headers) of many small functions for cc1 -O2."""
    rng = random.Random(seed)
    parts = ["struct pt { long x, y, z; double w; };"]
    for f in range(functions):
        k = rng.randrange(2, 9)
        body = [f"long f{f}(struct pt *p, long n, const long *a) {{", "  long s = 0;",
                "  for (long i = 0; i < n; i++) {"]
        for j in range(k):
            op = rng.choice(["+", "-", "^", "*"])
            body.append(f"    s = s {op} (a[(i * {rng.randrange(1, 17)} + {j}) % n] {rng.choice('+-^')} p[i % {k}].x);")
            if rng.random() < 0.4:
                body.append(f"    if (s > {rng.randrange(1000)}) p[i % {k}].w += (double)s / {j + 1};")
        body += ["  }", f"  return s + {f > 0 and f'f{f - 1}(p, n / 2, a)' or '0'};", "}"]
        parts.append("\n".join(body))
    path.write_text("\n\n".join(parts) + "\n")


def _tree(root: Path, dirs: int, files_per_dir: int, seed: int) -> None:
    rng = random.Random(seed)
    for d in range(dirs):
        sub = root / f"d{d % 16:02d}" / f"d{d:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        for f in range(files_per_dir):
            (sub / f"f{f:03d}.txt").write_bytes(rng.randbytes(rng.randrange(64, 8192)))


def _www(root: Path, pages: int, seed: int) -> None:
    """Static pages of 1-48 KiB for the web server (docs/oscache.md's web-server capture)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(pages):
        size = 1024 * (1 + (i * 7) % 48)
        (root / f"page{i}.html").write_text("".join(rng.choices("abcdefghij <>/\n", k=size)))


# BusyBox httpd answering a bounded load generator on loopback inside the guest
# (docs/oscache.md "A web server answering a bounded load generator"): the server forks per
# connection, BusyBox wget fetches 40 pages one after another. The shell, ifconfig, httpd and
# wget are BusyBox applets in the guest; the traced program is the host's /bin/sh.
_HTTPD_SCRIPT = (
    "ifconfig lo 127.0.0.1 up || exit 2; httpd -f -p 127.0.0.1:8080 -h www & sleep 0.2; n=0; "
    "for i in $(seq 40); do wget -q -O /dev/null http://127.0.0.1:8080/page$((i % 20)).html && n=$((n+1)); done; "
    'kill $!; echo "served $n of 40"; test $n = 40'
)

# Why a full-system trace is reproducible (docs/capture.md "Reproducibility").
_SYSTEM_BY_REPLAY = (
    "full-system capture by replay of the recorded guest.rr (QEMU record/replay): a rebuild replays the same log "
    "and gives the same trace record for record; a new recording (guest.rr removed, or a new kernel) is a different run"
)

_NUMPY_STREAM = """# STREAM triad (McCalpin) with NumPy: a = b + s*c over arrays far larger than any LLC
import numpy as np
n = 4_000_000
a = np.zeros(n); b = np.arange(n, dtype=float); c = np.ones(n)
for _ in range(1000):
    np.multiply(c, 3.0, out=a); np.add(a, b, out=a)
"""

_NUMPY_MATMUL = """# dense linear algebra: repeated 384x384 matrix products (BLAS dgemm)
import numpy as np
rng = np.random.default_rng(1)
a = rng.random((384, 384)); b = rng.random((384, 384))
for _ in range(1000):
    c = a @ b
    a, b = b, c / c.max()
"""

_NUMPY_STENCIL = """# 2-D 5-point Jacobi stencil on a 1024x1024 grid (8 MiB per array)
import numpy as np
n = 1024
u = np.zeros((n, n)); u[0, :] = 1.0
v = u.copy()
for _ in range(10000):
    v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    u, v = v, u
"""

_SCIPY_SPMV = """# sparse matrix-vector products (CSR, random pattern: indirect, pointer-chasing-like loads)
import numpy as np, scipy.sparse as sp
n, k = 400_000, 12
rng = np.random.default_rng(1)
m = sp.csr_matrix((rng.random(n * k), rng.integers(0, n, n * k), np.arange(0, n * k + 1, k)), shape=(n, n))
x = np.ones(n)
for _ in range(10000):
    x = m @ x + 1.0
    x /= x.max()
"""


# Shared-data threads (Azimi et al. case study 3, after Tam et al.: threads that share data
# run best on one chip). Compiled from these sources when the input is made (gcc -O2), so the
# binary is the installed gcc's output for fixed text.
_C_STENCIL_MT = """/* 2-D 5-point Jacobi stencil, 4 POSIX threads on one shared grid (the OpenMP static schedule
   written out): each thread owns a band of rows, and every sweep reads the boundary rows its
   neighbours wrote in the sweep before (the halo), then all meet at a barrier. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#define N 512
#define THREADS 4
#define SWEEPS 400
static double *grid[2];
static pthread_barrier_t barrier;
static double residual[THREADS];
static void *band(void *arg) {
    long t = (long)arg;
    int lo = 1 + t * (N - 2) / THREADS, hi = 1 + (t + 1) * (N - 2) / THREADS;
    for (int s = 0; s < SWEEPS; s++) {
        const double *u = grid[s & 1];
        double *v = grid[(s + 1) & 1], r = 0;
        for (int i = lo; i < hi; i++)
            for (int j = 1; j < N - 1; j++) {
                double x = 0.25 * (u[(i - 1) * N + j] + u[(i + 1) * N + j] + u[i * N + j - 1] + u[i * N + j + 1]);
                r += x > u[i * N + j] ? x - u[i * N + j] : u[i * N + j] - x;
                v[i * N + j] = x;
            }
        residual[t] = r;
        pthread_barrier_wait(&barrier);
    }
    return 0;
}
int main(void) {
    for (int k = 0; k < 2; k++) {
        grid[k] = calloc((size_t)N * N, sizeof(double));
        for (int j = 0; j < N; j++) grid[k][j] = 1.0; /* the hot top edge */
    }
    pthread_barrier_init(&barrier, 0, THREADS);
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], 0, band, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], 0);
    printf("%.9f\\n", residual[0] + residual[1] + residual[2] + residual[3]);
    return 0;
}
"""

_C_PIPELINE_MT = """/* Two 2-stage pipelines, 4 POSIX threads: each producer fills 16 KiB blocks (a generator
   stage) into a ring of 8 slots it shares with its consumer, which hashes and histograms each
   block (a checksum stage). Threads are created stage by stage, both producers, then both
   consumers, as a pipeline program starts its stages. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#define PIPES 2
#define SLOTS 8
#define WORDS 2048 /* 16 KiB per block */
#define BLOCKS 6000
struct pipe {
    uint64_t block[SLOTS][WORDS];
    int full[SLOTS];
    pthread_mutex_t lock;
    pthread_cond_t changed;
    uint64_t hash, histogram[256];
};
static struct pipe pipes[PIPES];
static void *produce(void *arg) {
    struct pipe *p = arg;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(p - pipes + 1);
    for (int b = 0; b < BLOCKS; b++) {
        int s = b % SLOTS;
        pthread_mutex_lock(&p->lock);
        while (p->full[s]) pthread_cond_wait(&p->changed, &p->lock);
        pthread_mutex_unlock(&p->lock);
        for (int w = 0; w < WORDS; w++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; p->block[s][w] = x; }
        pthread_mutex_lock(&p->lock);
        p->full[s] = 1;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
    }
    return 0;
}
static void *consume(void *arg) {
    struct pipe *p = arg;
    uint64_t h = 1469598103934665603ull;
    for (int b = 0; b < BLOCKS; b++) {
        int s = b % SLOTS;
        pthread_mutex_lock(&p->lock);
        while (!p->full[s]) pthread_cond_wait(&p->changed, &p->lock);
        pthread_mutex_unlock(&p->lock);
        for (int w = 0; w < WORDS; w++) { h = (h ^ p->block[s][w]) * 1099511628211ull; p->histogram[p->block[s][w] & 255]++; }
        pthread_mutex_lock(&p->lock);
        p->full[s] = 0;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
    }
    p->hash = h;
    return 0;
}
int main(void) {
    pthread_t th[2 * PIPES];
    for (int i = 0; i < PIPES; i++) {
        pthread_mutex_init(&pipes[i].lock, 0);
        pthread_cond_init(&pipes[i].changed, 0);
    }
    for (int i = 0; i < PIPES; i++) pthread_create(&th[i], 0, produce, &pipes[i]);
    for (int i = 0; i < PIPES; i++) pthread_create(&th[PIPES + i], 0, consume, &pipes[i]);
    for (int i = 0; i < 2 * PIPES; i++) pthread_join(th[i], 0);
    printf("%016llx %016llx\\n", (unsigned long long)pipes[0].hash, (unsigned long long)pipes[1].hash);
    return 0;
}
"""


def _c_program(name: str, source: str) -> Callable[[Path], None]:
    """The input: ``source`` written to ``NAME.c`` and compiled to ``./NAME`` (gcc -O2 -pthread)."""
    def make(d: Path) -> None:
        (d / f"{name}.c").write_text(source)
        r = subprocess.run(["gcc", "-O2", "-pthread", "-o", name, f"{name}.c"], cwd=d, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"gcc could not build {name}.c: {' '.join(r.stderr.split())[:200]}")
    return make

# ---- inputs for the SPEC stand-ins (COLORIS Table 1's and ROCS Table 2's programs) ----------

def _gtp(path: Path, moves: int, seed: int) -> None:
    """A Go game for GNU Go's GTP mode (gobmk is GNU Go: SPEC's inputs are GTP scripts): the
    engine plays both sides of a 19x19 game, ``moves`` moves after a few seeded opening stones."""
    rng = random.Random(seed)
    cols = "ABCDEFGHJKLMNOPQRST"
    lines = ["boardsize 19", "clear_board", "komi 6.5"]
    taken = set()
    for i in range(8):
        while True:
            v = f"{rng.choice(cols[2:17])}{rng.randrange(3, 18)}"
            if v not in taken:
                taken.add(v)
                break
        lines.append(f"play {'black' if i % 2 == 0 else 'white'} {v}")
    lines += [f"genmove {'black' if i % 2 == 0 else 'white'}" for i in range(moves)]
    lines += ["estimate_score", "quit"]
    path.write_text("\n".join(lines) + "\n")


_AMINO = "ACDEFGHIKLMNPQRSTVWY"


def _protein(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(_AMINO, k=n))


def _hmm_input(d: Path, seed: int) -> None:
    """hmmer's search (SPEC's hmmer runs hmmsearch): a profile HMM built (hmmbuild) from 40
    mutated copies of a seeded 300-residue family, and a database of 20,000 random sequences with
    200 family members planted in it."""
    rng = random.Random(seed)
    family = _protein(rng, 300)

    def mutate(s: str, rate: float) -> str:
        return "".join(rng.choice(_AMINO) if rng.random() < rate else c for c in s)

    aln = ["# STOCKHOLM 1.0"] + [f"seq{i} {mutate(family, 0.25)}" for i in range(40)] + ["//"]
    (d / "family.sto").write_text("\n".join(aln) + "\n")
    with open(d / "db.fa", "w") as f:
        for i in range(20_000):
            seq = mutate(family, 0.4) if i % 100 == 0 else _protein(rng, rng.randrange(100, 600))
            f.write(f">s{i}\n{seq}\n")
    r = subprocess.run(["hmmbuild", "--seed", "1", "family.hmm", "family.sto"], cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"hmmbuild failed: {(r.stderr.strip().splitlines() or ['no output'])[-1]}")


def _pov_scene(path: Path, objects: int, seed: int) -> None:
    """A POV-Ray scene (SPEC's povray renders one): seeded spheres and boxes with reflective and
    refractive finishes, CSG differences, two lights, a checkered plane."""
    rng = random.Random(seed)
    s = ["#version 3.7;", "global_settings { assumed_gamma 1.0 max_trace_level 6 }",
         "camera { location <0, 4, -14> look_at <0, 1, 0> angle 55 }",
         "light_source { <-10, 12, -10> color rgb 1 }", "light_source { <8, 6, -6> color rgb 0.5 }",
         "plane { y, 0 pigment { checker color rgb 0.9 color rgb 0.2 scale 1.5 } finish { reflection 0.2 } }"]
    for i in range(objects):
        x, z, r = rng.uniform(-7, 7), rng.uniform(-3, 10), rng.uniform(0.3, 1.1)
        col = f"rgb <{rng.random():.3f}, {rng.random():.3f}, {rng.random():.3f}>"
        fin = rng.choice(["finish { reflection 0.4 specular 0.6 }", "finish { phong 0.8 }",
                          "finish { specular 0.3 } ", "finish { reflection 0.1 }"])
        if i % 5 == 0:
            s.append(f"difference {{ box {{ <{x - r:.3f}, 0, {z - r:.3f}>, <{x + r:.3f}, {2 * r:.3f}, {z + r:.3f}> }} "
                     f"sphere {{ <{x:.3f}, {2 * r:.3f}, {z:.3f}>, {r * 1.2:.3f} }} pigment {{ color {col} }} {fin} }}")
        elif i % 7 == 0:
            s.append(f"sphere {{ <{x:.3f}, {r:.3f}, {z:.3f}>, {r:.3f} pigment {{ color rgbf <0.9, 0.95, 1, 0.8> }} "
                     f"interior {{ ior 1.5 }} finish {{ specular 0.8 }} }}")
        else:
            s.append(f"sphere {{ <{x:.3f}, {r:.3f}, {z:.3f}>, {r:.3f} pigment {{ color {col} }} {fin} }}")
    path.write_text("\n".join(s) + "\n")


def _yuv(path: Path, frames: int, width: int, height: int, seed: int) -> None:
    """Raw 4:2:0 video for x264 (h264ref encodes video): textured blocks moving over a gradient,
    with seeded noise, so motion search has real work."""
    import numpy as np

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    texture = rng.integers(0, 256, size=(64, 64), dtype=np.uint8)
    with open(path, "wb") as f:
        for t in range(frames):
            y = ((xx + yy + 2 * t) % 256).astype(np.uint8)
            for k in range(6):
                ox, oy = (37 * k + 3 * t * (k + 1)) % (width - 64), (23 * k + 2 * t) % (height - 64)
                y[oy:oy + 64, ox:ox + 64] = texture
            y = np.clip(y.astype(np.int16) + rng.integers(-6, 7, size=y.shape), 0, 255).astype(np.uint8)
            u = np.full((height // 2, width // 2), 128 + (t % 32), dtype=np.uint8)
            v = np.full((height // 2, width // 2), 128 - (t % 32), dtype=np.uint8)
            f.write(y.tobytes() + u.tobytes() + v.tobytes())


def _perl_script(path: Path, seed: int) -> None:
    """A Perl workload in perlbench's spirit (its inputs run text processing and mail-filter
    scripts): regular expressions, hashes, sorting, string building and sprintf."""
    path.write_text(f"""# generated by cachecolor.workloads (seed {seed})
use strict; use warnings;
my $s = {seed}; sub rnd {{ $s = ($s * 1103515245 + 12345) % 2147483648; return $s; }}
my @w = qw({' '.join(_WORDS)});
for my $round (1 .. 60) {{
    my (%count, @lines);
    for my $i (1 .. 4000) {{
        my $line = join(' ', map {{ $w[rnd() % @w] }} 1 .. 12) . " id=" . rnd() % 100000 . " <a\\@b.example>";
        push @lines, $line;
    }}
    for my $l (@lines) {{
        while ($l =~ /\\b(\\w+)\\b/g) {{ $count{{$1}}++; }}
        (my $t = $l) =~ s/id=(\\d+)/sprintf("ID[%08x]", $1)/e;
        $count{{length $t}}++ if $t =~ /^the|cache$/;
    }}
    my @top = (sort {{ $count{{$b}} <=> $count{{$a}} || $a cmp $b }} keys %count)[0 .. 9];
    my $joined = join(',', map {{ uc }} @top);
    print "$round $joined\\n";
}}
""")


def _lp(path: Path, rows: int, cols: int, seed: int) -> None:
    """A sparse, feasible, bounded linear program in MPS format (soplex solves LPs by the
    simplex method): each row a seeded sparse combination, right-hand sides from a known
    feasible point, a minimised cost with nonnegative coefficients plus bounds."""
    rng = random.Random(seed)
    point = [rng.uniform(0, 10) for _ in range(cols)]
    entries: dict[int, list[tuple[int, float]]] = {j: [] for j in range(cols)}
    rhs = []
    for i in range(rows):
        js = rng.sample(range(cols), 8)
        total = 0.0
        for j in js:
            a = round(rng.uniform(-5, 5), 3)
            entries[j].append((i, a))
            total += a * point[j]
        rhs.append(round(total + rng.uniform(0.5, 5), 3))  # a <= row: slack at the point
    # Fixed-format MPS: fields at columns 2, 5, 15, 25, 40.
    out = ["NAME          GENLP", "ROWS", " N  COST"] + [f" L  R{i}" for i in range(rows)] + ["COLUMNS"]
    for j in range(cols):
        out.append(f"    {f'X{j}':8}  {'COST':8}  {-round(rng.uniform(0.1, 3), 3):>12}")
        out += [f"    {f'X{j}':8}  {f'R{i}':8}  {a:>12}" for i, a in entries[j]]
    out.append("RHS")
    out += [f"    {'RHS':8}  {f'R{i}':8}  {b:>12}" for i, b in enumerate(rhs)]
    out.append("BOUNDS")
    out += [f" UP {'BND':8}  {f'X{j}':8}  {20:>12}" for j in range(cols)]
    out.append("ENDATA")
    path.write_text("\n".join(out) + "\n")


def _mincost_flow(path: Path, nodes: int, arcs: int, seed: int) -> None:
    """A min-cost flow problem in GLPK's DIMACS format (mcf is a network simplex on a vehicle
    scheduling min-cost flow): a seeded random network with a spanning path, so it is feasible,
    supplies at 20 sources and demands at 20 sinks."""
    rng = random.Random(seed)
    edges = [(i, i + 1) for i in range(1, nodes)] + [(i + 1, i) for i in range(1, nodes)]
    while len(edges) < arcs:
        a, b = rng.randrange(1, nodes + 1), rng.randrange(1, nodes + 1)
        if a != b:
            edges.append((a, b))
    supply = [0] * (nodes + 1)
    for _ in range(20):
        src, dst, amt = rng.randrange(1, nodes + 1), rng.randrange(1, nodes + 1), rng.randrange(5, 50)
        supply[src] += amt
        supply[dst] -= amt
    lines = [f"p min {nodes} {len(edges)}"] + [f"n {v} {supply[v]}" for v in range(1, nodes + 1) if supply[v]]
    lines += [f"a {a} {b} 0 {rng.randrange(50, 500)} {rng.randrange(1, 100)}" for a, b in edges]
    path.write_text("\n".join(lines) + "\n")


#: A user-mode program's default region: a billion instructions from its phase-chosen start
#: (the papers' runs are billions of instructions; a window of the first N of them is
#: `cachecolor evaluate --instructions N`).
REGION_INSTRUCTIONS = 1_000_000_000


@dataclass(frozen=True)
class Workload:
    """One program of the suite."""

    name: str
    cls: str  # the papers' class it stands for
    packages: tuple[str, ...]  # Debian packages (installed on demand; versions recorded)
    command: tuple[str, ...]  # run in the input directory; {in} = that directory
    make_input: Callable[[Path], None]
    input_desc: str
    skip: int  # instructions fast-forwarded (initialisation; used where region_by is "skip")
    # The region's length: instructions for a user-mode capture (the papers measure regions of
    # instructions and cycles: ROCS section 6.2 profiles after 4 billion cycles, COLORIS runs
    # whole programs), records for a full-system one (it cannot fast-forward and ends at a
    # record cap or the program's exit, so it always gives its own).
    length: int = REGION_INSTRUCTIONS
    threads: int = 1
    os_intensive: bool = False  # the Nellans study's programs: their cost is in the kernel
    note: str = ""
    # "user": QEMU user mode (the program's references only, fast-forward possible);
    # "system": full-system capture (kernel and program, region from the exec).
    capture: str = "user"
    guest_files: tuple[str, ...] = ()  # inputs copied into the guest (relative to the input dir)
    # How the region starts: "phase" (user mode: the SimPoint choice of cachecolor.regions over
    # the first `horizon` instructions) or "skip" (the fixed `skip` above).
    region_by: str = "phase"
    horizon: int = 0  # instructions profiled for the phase choice (0: PHASE_HORIZON)
    # The SPEC CPU program of the papers this one stands in for, with the paper's figure for it
    # where the paper gives one (COLORIS Table 1: run time alone on the Xeon E5506; ROCS Table 2).
    stands_in: str = ""


def _files(**texts: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        for name, text in texts.items():
            (d / name.replace("_", ".", 1)).write_text(text)
    return make


def _py(script: str) -> tuple[str, ...]:
    """python3 running ``script`` through ``-c``: the interpreter then never sees the script's
    absolute path (``sys.path[0]`` is ''), so the trace does not depend on where the cache is."""
    return ("/usr/bin/python3", "-c", f"exec(compile(open({script!r}).read(), {script!r}, 'exec'))")


M = 1_000_000
SUITE: tuple[Workload, ...] = (
    Workload("stream", "streaming over large arrays", ("python3", "python3-numpy"),
             _py("stream.py"), _files(stream_py=_NUMPY_STREAM),
             "NumPy triad over 3 x 32 MB arrays", 450 * M),
    Workload("matmul", "dense linear algebra", ("python3", "python3-numpy", "libblas3"),
             _py("matmul.py"), _files(matmul_py=_NUMPY_MATMUL),
             "384 x 384 dgemm, repeated", 450 * M),
    Workload("stencil", "stencil", ("python3", "python3-numpy"),
             _py("stencil.py"), _files(stencil_py=_NUMPY_STENCIL),
             "5-point Jacobi, 1024 x 1024 doubles", 450 * M),
    Workload("spmv", "sparse / pointer-chasing", ("python3", "python3-scipy", "python3-numpy"),
             _py("spmv.py"), _files(spmv_py=_SCIPY_SPMV),
             "CSR 400k x 400k, 4.8 M nonzeros, random columns", 700 * M),
    Workload("xz", "compression", ("xz-utils",), ("xz", "-6", "-c", "-T1", "corpus.txt"),
             lambda d: _corpus(d / "corpus.txt", 16 << 20, 1), "16 MiB generated text", 50 * M),
    Workload("zstd", "compression", ("zstd",), ("zstd", "-19", "-c", "-T1", "corpus.txt"),
             lambda d: _corpus(d / "corpus.txt", 16 << 20, 2), "16 MiB generated text", 50 * M),
    Workload("bzip2", "compression", ("bzip2",), ("bzip2", "-9", "-c", "corpus.txt"),
             lambda d: _corpus(d / "corpus.txt", 16 << 20, 3), "16 MiB generated text", 50 * M,
             stands_in="401.bzip2 (COLORIS Table 1: 961 s alone)"),
    Workload("sqlite", "database", ("sqlite3",), ("sqlite3", ":memory:", ".read queries.sql"),
             lambda d: _sql(d / "queries.sql", 100_000, 100_000, 4),
             "100k-row table, 2 indexes, 100k queries (50% point, 30% range, 20% join)", 400 * M),
    Workload("python", "interpreter", ("python3",), _py("work.py"),
             lambda d: _python_script(d / "work.py", 5), "generated script: BST, dicts, strings", 300 * M),
    Workload("cc1", "compiler", ("gcc", "cpp-12", "gcc-12"),
             ("/usr/lib/gcc/x86_64-linux-gnu/12/cc1", "-quiet", "-O2", "gen.c", "-o", "gen.s"),
             lambda d: _c_source(d / "gen.c", 3000, 6), "generated C, 3000 functions, -O2", 200 * M,
             stands_in="403.gcc (cc1 itself; COLORIS Table 1: 507 s alone)"),
    Workload("sort", "sort", ("coreutils",), ("sort", "--parallel=1", "-S", "512M", "lines.txt"),
             lambda d: _lines(d / "lines.txt", 500_000, 7), "500 k generated lines", 100 * M),
    Workload("sort-mt", "multithreaded, shared data", ("coreutils",),
             ("sort", "--parallel=4", "-S", "512M", "lines.txt"),
             lambda d: _lines(d / "lines.txt", 500_000, 8), "500 k generated lines, 4 threads",
             100 * M, threads=4,
             note="thread interleaving in the trace depends on host scheduling: hash not reproducible"),
    # SPEC CPU stand-ins: Debian programs doing what the papers' SPEC programs do (COLORIS
    # Table 1, ROCS Table 2), on generated inputs.
    Workload("gnugo", "game tree search", ("gnugo",),
             ("/usr/games/gnugo", "--mode", "gtp", "--gtp-input", "game.gtp", "--level", "10", "--seed", "1"),
             lambda d: _gtp(d / "game.gtp", 40, 11), "19x19 game, 8 seeded stones, 40 generated moves, level 10",
             100 * M, stands_in="445.gobmk (GNU Go itself; COLORIS Table 1: 736 s alone)"),
    Workload("hmmer", "profile HMM search", ("hmmer",),
             ("hmmsearch", "--cpu", "0", "--seed", "1", "-o", "hits.txt", "family.hmm", "db.fa"),
             lambda d: _hmm_input(d, 12), "HMM of a 300-residue family vs 20,000 sequences (200 members)",
             100 * M, stands_in="456.hmmer (hmmsearch; COLORIS Table 1: 849 s alone)"),
    Workload("povray", "ray tracing", ("povray",),
             ("povray", "+Iscene.pov", "+Oscene.png", "+W320", "+H240", "-D", "+WT1", "+A0.3", "-V", "+Q9"),
             lambda d: _pov_scene(d / "scene.pov", 60, 13), "60 seeded objects (CSG, reflection, refraction), 320x240",
             100 * M, stands_in="453.povray (COLORIS Table 1: 366 s alone)"),
    Workload("x264", "video encoding", ("x264",),
             ("x264", "--threads", "1", "--no-progress", "--preset", "medium", "--input-res", "352x288", "--fps", "25",
              "-o", "out.264", "video.yuv"),
             lambda d: _yuv(d / "video.yuv", 60, 352, 288, 14), "60 CIF frames of generated moving texture",
             100 * M, stands_in="464.h264ref (H.264 encoding; COLORIS Table 1: 1131 s alone)"),
    Workload("perl", "interpreter (text processing)", ("perl",), ("perl", "work.pl"),
             lambda d: _perl_script(d / "work.pl", 15), "generated script: regexes, hashes, sort, sprintf",
             100 * M, stands_in="400.perlbench (COLORIS Table 1: 569 s alone)"),
    Workload("clp", "linear programming (simplex)", ("coinor-clp",),
             ("clp", "model.mps", "-primalsimplex", "-quit"),
             lambda d: _lp(d / "model.mps", 6000, 9000, 16), "sparse LP, 6,000 rows x 9,000 columns, 8 per row",
             100 * M, stands_in="450.soplex (simplex LP; COLORIS Table 1: 429 s alone)"),
    Workload("glpk-mcf", "network flow (min-cost flow)", ("glpk-utils",),
             ("glpsol", "--mincost", "flow.min", "-o", "flow.sol"),
             lambda d: _mincost_flow(d / "flow.min", 20_000, 120_000, 17), "min-cost flow, 20,000 nodes, 120,000 arcs",
             100 * M,
             stands_in="429.mcf / 181.mcf (min-cost flow; COLORIS Table 1: 450 s; ROCS Table 2: IPC 0.05, L2 MPKI 68.3)"),
    # Multithreaded, shared data: their threads run on cores of their own (cachecolor evaluate).
    Workload("pigz", "multithreaded compression", ("pigz",), ("pigz", "-p", "4", "-6", "-c", "corpus.txt"),
             lambda d: _corpus(d / "corpus.txt", 16 << 20, 18), "16 MiB generated text, 4 threads",
             50 * M, threads=4, note="thread interleaving in the trace depends on host scheduling: hash not reproducible"),
    Workload("xz-mt", "multithreaded compression", ("xz-utils",),
             ("xz", "-6", "-c", "-T4", "--block-size=2MiB", "corpus.txt"),
             lambda d: _corpus(d / "corpus.txt", 16 << 20, 19), "16 MiB generated text, 4 threads, 2 MiB blocks",
             50 * M, threads=4, note="thread interleaving in the trace depends on host scheduling: hash not reproducible"),
    Workload("stencil-mt", "multithreaded, shared data: stencil", ("gcc", "libc6-dev"), ("./stencil-mt",),
             _c_program("stencil-mt", _C_STENCIL_MT),
             "5-point Jacobi, 512 x 512 doubles, 4 threads in row bands (halo rows shared), 400 sweeps",
             50 * M, threads=4, horizon=300 * M,
             note="thread interleaving in the trace depends on host scheduling: hash not reproducible"),
    Workload("pipeline-mt", "multithreaded, shared data: producer-consumer", ("gcc", "libc6-dev"), ("./pipeline-mt",),
             _c_program("pipeline-mt", _C_PIPELINE_MT),
             "2 pipelines of producer and consumer, 16 KiB blocks in 8-slot rings, 4 threads created stage by stage",
             50 * M, threads=4, horizon=300 * M,
             note="thread interleaving in the trace depends on host scheduling: hash not reproducible"),
    # Full-system: no fast-forward (skip 0), the region from the exec to its record cap or the exit.
    Workload("find", "OS-intensive: file system walk", ("findutils",),
             ("find", "tree", "-type", "f", "-size", "+2k", "-newer", "tree"),
             lambda d: _tree(d / "tree", 400, 20, 9), "generated tree, 400 dirs x 20 files",
             0, 40 * M, os_intensive=True, capture="system", guest_files=("tree",),
             note=_SYSTEM_BY_REPLAY),
    Workload("tar", "OS-intensive: file reads and writes", ("tar",),
             ("tar", "-cf", "out.tar", "tree"),
             lambda d: _tree(d / "tree", 400, 20, 10), "generated tree, 400 dirs x 20 files",
             0, 40 * M, os_intensive=True, capture="system", guest_files=("tree",),
             note=_SYSTEM_BY_REPLAY),
    Workload("httpd", "OS-intensive: web server on loopback", ("busybox-static", "dash"),
             ("/bin/sh", "-c", _HTTPD_SCRIPT), lambda d: _www(d / "www", 20, 27),
             "20 generated pages of 1-48 KiB; BusyBox httpd, 40 BusyBox wget requests in sequence",
             0, 200 * M, os_intensive=True, capture="system", guest_files=("www",),
             note=_SYSTEM_BY_REPLAY),
)

# What a full-system workload boots (recorded with their versions; `make tools-system` installs
# them). The kernel image is recorded by itself (fullsys.kernel_identity).
SYSTEM_PACKAGES = ("qemu-system-x86", "busybox-static")

# The CI-sized subset: three programs, short regions (tests/test_workloads.py).
CI_SUBSET = {"sort": (2 * M, 300_000), "sqlite": (20 * M, 300_000), "xz": (5 * M, 300_000)}


def by_name(name: str) -> Workload:
    for w in SUITE:
        if w.name == name:
            return w
    raise KeyError(f"unknown workload {name!r}; the suite has {', '.join(w.name for w in SUITE)}")


# ---- packages ------------------------------------------------------------------------------

def package_versions(packages: tuple[str, ...]) -> dict[str, Optional[str]]:
    """Installed Debian versions (None when not installed)."""
    out: dict[str, Optional[str]] = {}
    for p in packages:
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Status} ${Version}", p], capture_output=True, text=True)
        parts = r.stdout.split()
        out[p] = parts[3] if r.returncode == 0 and len(parts) >= 4 and parts[2] == "installed" else None
    return out


def install(workloads: tuple[Workload, ...] = SUITE) -> dict[str, str]:
    """Install missing packages with apt-get (as root); returns {package: error} for failures."""
    missing = sorted({p for w in workloads for p, v in package_versions(w.packages).items() if v is None})
    if any(w.capture == "system" for w in workloads):
        from .fullsys import missing_system_tools

        # The packages full-system capture boots, as `make tools-system` decides: by the tools
        # found, so a kernel installed without the linux-image-amd64 metapackage is enough.
        if missing_system_tools() is not None:
            missing = sorted(set(missing) | {p for p, v in package_versions(SYSTEM_PACKAGES).items() if v is None}
                             | ({"linux-image-amd64"} if not any(n.startswith("vmlinuz-") for n in _listdir("/boot")) else set()))
    if not missing:
        return {}
    if os.geteuid() != 0:
        return {p: "not installed; run: sudo apt-get install " + " ".join(missing) for p in missing}
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    errors = {}
    for p in missing:  # one by one, so one missing package does not stop the others
        r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", p], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            errors[p] = (r.stderr.strip().splitlines() or ["apt-get failed"])[-1]
    return errors


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


# ---- capture -------------------------------------------------------------------------------

_CLEAN_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "PYTHONHASHSEED": "0",
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "TZ": "UTC",
}


def capture_clean(argv: list[str], out: Path, *, cwd: Path, skip: int = 0, records: Optional[int] = None,
                  ifetch: bool = True, bbv: Optional[tuple[int, Path]] = None,
                  instructions: Optional[int] = None) -> tuple[dict[str, Any], float]:
    """Capture ``argv`` with QEMU into ``out`` in a child Python with address-space randomisation
    off (``setarch -R``) and a clean, fixed environment, so that the guest program sees the same
    stack, environment and layout on every run. Returns (the capture summary, seconds); a
    program that exits non-zero gives a summary with ``error``."""
    code = _CHILD_SIGNALS + (
        "import json, sys\nfrom cachecolor.traces import capture\nfrom cachecolor._core import CaptureError\n"
        "a = json.loads(sys.argv[1])\n"
        "try:\n    s = capture(a['argv'], a['out'], 'qemu', ifetch=a['ifetch'], max_records=a['records'], skip_instructions=a['skip'],"
        " bbv_interval=a['bbv'][0], bbv_out=a['bbv'][1], max_instructions=a['instructions'])\n"
        "except CaptureError as e:\n    s = dict(getattr(e, 'summary', None) or {}, error=str(e))\n"
        "print(); print(json.dumps(s))\n"  # on a line of its own after the program's output
    )
    args = json.dumps({"argv": argv, "out": str(out), "records": records, "skip": skip, "ifetch": ifetch,
                       "bbv": [bbv[0], str(bbv[1])] if bbv else [0, None], "instructions": instructions})
    cmd = ["setarch", "x86_64", "-R", "env", "-i", *[f"{k}={v}" for k, v in _CLEAN_ENV.items()],
           "HOME=/nonexistent", sys.executable, "-c", code, args]
    return _child_json(cmd, cwd, "capture")


def capture_system_clean(argv: list[str], out: Path, *, cwd: Path, guest_files: tuple[str, ...],
                         records: Optional[int], record: Optional[Path] = None,
                         replay: Optional[Path] = None) -> tuple[dict[str, Any], float]:
    """Full-system capture of ``argv`` (``fullsys.capture_system``) into ``out`` in a child
    Python started in ``cwd`` (the guest's working directory is the host's: the input directory,
    with ``guest_files`` copied in), optionally writing (``record``) or replaying (``replay``) a
    QEMU record/replay log. Returns ({"summary": ..., "guest": ...} or {"error": ...},
    seconds). The guest's environment is its own init's (fixed), so the host's is kept: it
    carries ``$CACHECOLOR_KERNEL`` and the tool overrides."""
    code = _CHILD_SIGNALS + (
        "import json, sys\nfrom cachecolor.fullsys import capture_system\nfrom cachecolor._core import CaptureError\n"
        "a = json.loads(sys.argv[1])\n"
        "try:\n    s = capture_system(a['argv'], a['out'], guest_files=a['files'], max_records=a['records'],"
        " record=a['record'], replay=a['replay'])\n"
        "except CaptureError as e:\n    s = {'error': str(e)}\n"
        "print(json.dumps(s))\n"
    )
    args = json.dumps({"argv": argv, "out": str(out), "records": records, "files": list(guest_files),
                       "record": None if record is None else str(record),
                       "replay": None if replay is None else str(replay)})
    return _child_json([sys.executable, "-c", code, args], cwd, "full-system capture")


#: Prepended to a capture child's code: SIGINT raises KeyboardInterrupt even when the child was
#: started with it ignored (a background job of a non-interactive shell), and SIGTERM does too,
#: so that an interrupted capture stops its tracer and removes its temporary files.
_CHILD_SIGNALS = (
    "import signal\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "signal.signal(signal.SIGTERM, signal.default_int_handler)\n"
)

#: How long an interrupted capture child may take to stop its tracer and clean up before it is
#: killed (it stops within a progress period, about a quarter of a second).
CHILD_STOP_SECONDS = 30.0


def _child_json(cmd: list[str], cwd: Path, what: str) -> tuple[dict[str, Any], float]:
    """Run a capture child in ``cwd``; (the JSON its last stdout line holds, seconds). A child
    that printed none raises ``RuntimeError`` naming ``what`` failed, its exit and last stderr.

    Ctrl-C or SIGTERM here is passed on to the child as one SIGINT and the child is waited for,
    so it stops its tracer and removes its ``/tmp/cachecolor-capture.*`` directory (``subprocess.run``
    SIGKILLed it, leaving them). The child runs in a session of its own so that a terminal's
    Ctrl-C reaches it only through this, once."""
    t0 = time.monotonic()
    # Bytes: the traced program shares the child's stdout, and a compressor's output is not text
    # (bug: xz's "\xfd7zXZ" skipped it with a UnicodeDecodeError once a region reached it).
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate()
    except BaseException:
        _stop_child(proc)
        raise
    secs = time.monotonic() - t0
    out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    last = out.strip().splitlines()[-1] if out.strip() else ""
    try:
        return json.loads(last), secs
    except json.JSONDecodeError:
        line = (err.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {line}") from None


def _stop_child(proc: "subprocess.Popen[bytes]") -> None:
    """Interrupt a capture child and wait for it to clean up; kill it only if it does not stop
    within ``CHILD_STOP_SECONDS`` (or a second interrupt comes)."""
    import signal

    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=CHILD_STOP_SECONDS)
    except BaseException:
        proc.kill()
        proc.communicate()


def _spec(w: Workload, skip: int, records: int) -> dict[str, Any]:
    spec = {"meta_version": META_VERSION, "name": w.name, "command": list(w.command), "skip": skip,
            "records_requested": records, "packages": package_versions(w.packages), "input": w.input_desc}
    if w.capture == "system":
        # A different kernel, QEMU or BusyBox is a different trace: part of the definition.
        # (Only full-system workloads carry these keys, so user-mode traces stay cached.)
        from .fullsys import kernel_identity, locate_kernel

        spec["capture"] = "system"
        spec["guest_files"] = list(w.guest_files)
        spec["system_packages"] = package_versions(SYSTEM_PACKAGES)
        spec["kernel"] = kernel_identity(locate_kernel())
    return spec


def wdir(w: Workload, root: Optional[Path] = None) -> Path:
    # Absolute: the capture children run in the input directory, so a relative cache
    # (`--cache out/c`) would name files under it.
    return Path(root or cache_dir()).absolute() / "workloads" / w.name


def info(w: Workload, root: Optional[Path] = None) -> Optional[dict[str, Any]]:
    p = wdir(w, root) / "meta.json"
    return json.loads(p.read_text()) if p.exists() else None


def _fresh_input(w: Workload, d: Path) -> Path:
    """``d/input`` generated anew (deterministic: the same bytes every time)."""
    inp = d / "input"
    if inp.exists():
        shutil.rmtree(inp)
    inp.mkdir(parents=True)
    w.make_input(inp)
    return inp


#: The phase choice's defaults: vectors of 10 M instructions over the first 2 B instructions
#: (200 intervals; SimPoint's 100 M intervals would give 20).
PHASE_INTERVAL = 10 * 1_000_000
PHASE_HORIZON = 2_000 * 1_000_000
REGION_VERSION = 1


def choose_region(w: Workload, *, root: Optional[Path] = None, horizon: Optional[int] = None,
                  interval: int = PHASE_INTERVAL, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Where ``w``'s region starts, chosen by phase (``cachecolor.regions``): a profiling run
    under the QEMU plugin writes basic-block vectors for the first ``horizon`` instructions
    (nothing is traced), and the region starts at the interval nearest the dominant cluster's
    centroid. Cached in ``region.json`` beside the trace (keyed by the command, input, package
    versions, horizon and interval). Raises ``RuntimeError`` when the profiling run fails."""
    from . import regions

    horizon = horizon or w.horizon or PHASE_HORIZON
    d = wdir(w, root)
    key = {"version": REGION_VERSION, "command": list(w.command), "input": w.input_desc,
           "packages": package_versions(w.packages), "horizon": horizon, "interval": interval}
    path = d / "region.json"
    if path.exists():
        doc = json.loads(path.read_text())
        if doc.get("key") == key:
            return doc["choice"]
    missing = [p for p, v in key["packages"].items() if v is None]
    if missing:
        raise RuntimeError(f"package(s) not installed: {', '.join(missing)} (make workloads installs them)")
    d.mkdir(parents=True, exist_ok=True)
    inp = _fresh_input(w, d)
    bb, probe = d / "bbv.txt.tmp", d / "profile.cctrace.tmp"
    try:
        # The trace is one record past the horizon (or none if the program ends first): the
        # vectors are what this run is for.
        summary, secs = capture_clean(list(w.command), probe, cwd=inp, skip=horizon, records=1, bbv=(interval, bb))
        if summary.get("error") and not summary.get("truncated"):
            raise RuntimeError(f"profiling run failed: {summary['error']}")
        vectors = regions.read_bbv(bb)
        if vectors:
            choice = regions.choose(vectors, interval)
        else:  # the whole run is shorter than one interval: it is its own region
            choice = {"method": "simpoint", "interval": interval, "intervals": 0, "skip": 0,
                      "note": "the program ran less than one interval: the region starts at its start"}
    except BaseException:
        bb.unlink(missing_ok=True)  # a failed profile leaves nothing behind
        raise
    finally:
        probe.unlink(missing_ok=True)
    bb.replace(d / "bbv.txt")
    choice.update(horizon=horizon, profile_seconds=round(secs, 1),
                  profiled_instructions=choice["intervals"] * interval)
    _output.write_text(path, json.dumps({"key": key, "choice": choice}, indent=1) + "\n")
    if choice["intervals"]:
        log(f"{w.name:8} region by phase: {choice['intervals']} intervals of {interval:,} instructions, k={choice['k']}, "
            f"dominant cluster {choice['weights'][choice['dominant_cluster']]:.0%}, region at {choice['skip']:,} instructions")
    return choice


def build(w: Workload, *, skip: Optional[int] = None, records: Optional[int] = None,
          root: Optional[Path] = None, force: bool = False, log: Callable[[str], Any] = print,
          horizon: Optional[int] = None, instructions: Optional[int] = None,
          keep_recording: Optional[Path] = None) -> dict[str, Any]:
    """Capture ``w`` (unless its cached trace matches); returns its metadata. Raises
    ``RuntimeError`` naming what failed (package missing, capture error).

    The region starts at ``skip`` instructions when given; else where ``w.region_by`` says: a
    user-mode program's phase choice (``choose_region`` over ``horizon`` instructions), or its
    fixed ``w.skip``. With ``instructions`` the region ends at that many instructions (its last
    record is the one that reaches them), with ``records`` at that many records; with neither,
    at the program's own ``w.length`` (instructions in user mode, records in full system), or
    at the program's exit if that comes first.

    A full-system program is captured by replaying its kept record/replay log
    (``recorded_log``: recorded first when there is none that fits), so a rebuild gives the same
    trace record for record."""
    if records is None and instructions is None:  # the program's own region length
        if w.capture == "user":
            instructions = w.length
        else:
            records = w.length
    d = wdir(w, root)
    if skip is not None:
        choice: dict[str, Any] = {"method": "given skip", "skip": skip}
    elif w.capture == "user" and w.region_by == "phase":
        choice = choose_region(w, root=root, horizon=horizon, log=log)
        skip = int(choice["skip"])
    else:
        skip = w.skip
        choice = {"method": "exec (full system: no fast-forward)" if w.capture == "system" else "fixed skip", "skip": skip}
    if w.capture == "system":
        from .fullsys import missing_system_tools

        if skip:
            raise RuntimeError(f"skip {skip}: a full-system capture cannot fast-forward (its region starts at the program's exec); give 0")
        why = missing_system_tools()
        if why is not None:
            raise RuntimeError(f"{w.name} cannot be captured here: {why}")
    spec = _spec(w, skip, records)
    if instructions is not None:
        if w.capture == "system":
            raise RuntimeError(f"--instructions: a full-system capture ends at a record count or the program's exit")
        spec["instructions_requested"] = instructions
        spec["records_requested"] = None
    missing = [p for p, v in spec["packages"].items() if v is None]
    if missing:
        raise RuntimeError(f"package(s) not installed: {', '.join(missing)} (make workloads installs them)")
    trace = d / "trace.cctrace"
    old = info(w, root)
    if not force and old and trace.exists() and all(old.get(k) == v for k, v in spec.items()):
        return old
    inp = _fresh_input(w, d)
    (d / "meta.json").unlink(missing_ok=True)  # a failed capture leaves no stale metadata
    guest: dict[str, Any] = {}
    replay_doc: dict[str, Any] = {}
    if w.capture == "system":
        trace.unlink(missing_ok=True)  # a failed capture must not leave the old trace looking new
        replay_doc = recorded_log(w, spec, inp, log=log, keep_recording=keep_recording)
        doc, secs = capture_system_clean(list(w.command), trace, cwd=inp, guest_files=w.guest_files, records=records,
                                         replay=d / REPLAY_LOG)
        if "error" in doc:
            trace.unlink(missing_ok=True)
            raise RuntimeError(f"full-system capture (replay of {REPLAY_LOG}) failed: {doc['error']}")
        summary, guest = doc["summary"], doc.get("guest") or {}
    else:
        summary, secs = capture_clean(list(w.command), trace, cwd=inp, skip=skip,
                                      records=None if instructions is not None else records, instructions=instructions)
    if summary.get("error") and not summary.get("truncated"):
        raise RuntimeError(f"capture failed: {summary['error']}")
    if not trace.exists():
        raise RuntimeError("capture wrote no trace")
    from .traces import records_hash, trace_info

    ti = trace_info(trace)
    meta = dict(spec)
    meta.update(
        records=ti["records"], instructions=ti.get("instructions"), threads=ti.get("threads"),
        kinds=dict(ti["kinds"]),
        privileged_records=ti.get("privileged", 0), truncated=bool(summary.get("truncated")),
        exit_code=summary.get("exit_code"), capture_seconds=round(secs, 1),
        records_hash=records_hash(trace), trace_bytes=trace.stat().st_size,
        # User mode: one thread under a fixed environment; full system: a replay of the kept log.
        reproducible=(w.threads == 1 and w.capture == "user") or w.capture == "system", note=w.note,
        capture=w.capture, region_choice=choice,
        # User mode runs no kernel: no kernel records (docs/oscache.md).
        kernel_code=w.capture == "system",
    )
    if w.capture == "system":
        meta.update(_system_meta(trace, guest))
        meta["record_replay"] = {k: replay_doc[k] for k in ("log", "log_bytes", "log_sha256", "recorded_records",
                                                             "recording_exit_code", "record_seconds")}
    _output.write_json(d / "meta.json", meta)
    return meta


#: The record/replay log of a full-system workload, beside its trace; ``replay.json`` keys it.
REPLAY_LOG = "guest.rr"


def recorded_log(w: Workload, spec: dict[str, Any], inp: Path, *, log: Callable[[str], Any] = print,
                 keep_recording: Optional[Path] = None) -> dict[str, Any]:
    """The record/replay log ``w``'s replay capture of ``spec`` needs, recorded now unless the
    kept one has the same definition (``spec`` but the record count: command, input, guest
    files, package versions, kernel). Returns ``replay.json``'s document. The recording runs
    the program to its exit, whatever the region's cap: QEMU writes a log's header when it exits,
    and a recording killed at a record cap left one its replay refused ("Replay: invalid input
    log file version"); a log of the whole run serves every cap. The recording's own trace is
    not kept (the replay's is the workload's) unless ``keep_recording`` names where to move it
    (to check the replay against it). Raises ``RuntimeError`` when the recording fails; a failed
    recording leaves no log."""
    d = inp.parent
    key = {k: v for k, v in spec.items() if k != "records_requested"}
    path, rr = d / "replay.json", d / REPLAY_LOG
    if path.exists() and rr.exists():
        doc = json.loads(path.read_text())
        if doc.get("key") == key:
            return doc
    # The old log no longer fits: it and its key go before a new one is recorded.
    path.unlink(missing_ok=True)
    rr.unlink(missing_ok=True)
    tmp_log, tmp_trace = d / (REPLAY_LOG + ".tmp"), d / "recording.cctrace.tmp"
    try:
        out, secs = capture_system_clean(list(w.command), tmp_trace, cwd=inp, guest_files=w.guest_files,
                                         records=None, record=tmp_log)
        if "error" in out:
            raise RuntimeError(f"full-system recording failed: {out['error']}")
        summary = out["summary"]
        if summary.get("error"):
            raise RuntimeError(f"full-system recording failed: {summary['error']}")
        if keep_recording is not None:
            tmp_trace.replace(keep_recording)
    except BaseException:
        tmp_log.unlink(missing_ok=True)
        raise
    finally:
        tmp_trace.unlink(missing_ok=True)
    import hashlib

    tmp_log.replace(rr)
    h = hashlib.sha256()
    with open(rr, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    doc = {"key": key, "log": REPLAY_LOG, "log_bytes": rr.stat().st_size, "log_sha256": h.hexdigest(),
           "recorded_records": summary.get("records"), "recording_exit_code": summary.get("exit_code"),
           "record_seconds": round(secs, 1)}
    _output.write_json(path, doc)
    log(f"{w.name:8} recorded {REPLAY_LOG}: {doc['log_bytes'] / 2**20:.1f} MiB, {doc['recorded_records'] or 0:,} records, {secs:.1f} s")
    return doc


def _system_meta(trace: Path, guest: dict[str, Any]) -> dict[str, Any]:
    """What a full-system trace adds to a workload's metadata: the region (no fast-forward),
    the privileged share of its instructions, its guest tasks and the guest's own accounting."""
    from .fullsys import task_groups, task_summary, tasks

    tl = tasks(trace) or []
    g = task_groups(tl)
    user = sum(v["user"] for v in g.values())
    kern = sum(v["kernel"] for v in g.values())
    prog = [t for t in tl if t.get("program")]
    return {
        "region": "from the program's exec (full-system capture cannot fast-forward) to records_requested records or its exit",
        # Nellans et al. Figure 1 counts instructions: the kernel's share of the trace's.
        "privileged_instructions": kern,
        "privileged_instruction_share": kern / max(1, user + kern),
        "guest_tasks": len(tl),
        "task_groups": g,
        "program_tasks": [{k: t[k] for k in ("thread", "pid", "comm", "user_instructions", "kernel_instructions") if k in t}
                          for t in prog],
        "task_summary": task_summary(trace),
        "guest": {k: guest.get(k) for k in ("utime", "stime", "hz", "boot_seconds", "run_seconds")}
        | {"output": (guest.get("output") or "")[-2000:]},
    }


def build_all(names: Optional[list[str]] = None, *, log: Callable[[str], Any] = print, **kw: Any) -> dict[str, Any]:
    """Build every named workload (default: all); failures are reported and skipped."""
    results: dict[str, Any] = {}
    for w in (SUITE if not names else tuple(by_name(n) for n in names)):
        t0 = time.monotonic()
        try:
            m = build(w, log=log, **kw)
            results[w.name] = m
            log(f"{w.name:8} ok   {m['records']:>11,} records {m['instructions'] or 0:>11,} instructions "
                f"{time.monotonic() - t0:6.1f} s  {m.get('records_hash', '?')[:12]}"
                + (f"  full system: kernel {100 * m['privileged_instruction_share']:.1f}% of instructions, {m['guest_tasks']} guest tasks"
                   if m.get("capture") == "system" else ""))
        except Exception as e:  # noqa: BLE001 -- one program's failure must not stop the suite
            results[w.name] = {"error": str(e)}
            log(f"{w.name:8} SKIPPED: {e}")
    return results


# ---- characterization ----------------------------------------------------------------------

CHAR_MACHINE = "xeon-e5506"  # COLORIS's machine (002 section 4): 4 MiB 16-way LLC, 64 colors


def system_config(trace: Path, name: str, machine: str = CHAR_MACHINE) -> dict[str, Any]:
    """One process running the captured trace alone on core 0 of ``machine``, linux policy."""
    return {
        "machine": {"preset": machine},
        "memory": {"ram": "2GiB"},
        "policy": {"name": "linux"},
        "processes": [{"name": name, "pin": [0], "threads": [{"trace": str(trace), "format": "native"}]}],
    }


def characterize(w: Workload, *, root: Optional[Path] = None, machine: str = CHAR_MACHINE,
                 plot_dir: Optional[Path] = None) -> dict[str, Any]:
    """IPC and LLC MPKI (whole-system model of ``machine``), the line MRC, the page-level LLC
    profile, the footprint and the privileged share of ``w``'s cached trace; writes
    ``characterization.json`` beside it and, with ``plot_dir``, ``NAME.png``."""
    from .analysis import mrc
    from .pages import page_profile
    from .system import simulate_system

    meta = info(w, root)
    d = wdir(w, root)
    trace = d / "trace.cctrace"
    if meta is None or not trace.exists():
        raise RuntimeError(f"{w.name}: no trace; run `cachecolor workloads build {w.name}` first")
    sysres = simulate_system(system_config(trace, w.name, machine)).process(w.name)
    curve = mrc(trace, method="shards", rate=0.1, points=60) if meta["records"] > 2_000_000 else mrc(trace, points=60)
    from .presets import machine as preset

    # One core's view of the machine's caches (the page profile takes a cache hierarchy).
    hier = {k: v for k, v in preset(machine)["hierarchy"].items() if k not in ("cores", "chips")}
    prof = page_profile({"hierarchy": hier}, trace, level=hier["levels"][-1]["name"])
    pages = prof.pages
    # The whole-system model charges max(icount, 1) instructions per record (system/mod.rs:
    # "a record is at least one instruction"), so on a captured trace with fetches, where a
    # load or store has icount 0 because its instruction was counted by its fetch, it counts
    # every record as an instruction. IPC and MPKI here use the trace's exact instruction count;
    # the model's own figures are kept as model_* (its cycles include the base CPI of the extra
    # "instructions", so IPC is a lower bound).
    insns = int(meta["instructions"])
    model_insns = int(sysres["instructions"])
    llc_misses_sys = float(sysres["llc_mpki"]) * model_insns / 1000.0
    ch = {
        "name": w.name, "machine": machine, "instructions": insns,
        "model_instructions": model_insns, "cycles": float(sysres["cycles"]),
        "ipc": insns / float(sysres["cycles"]), "llc_mpki": llc_misses_sys * 1000.0 / max(1, insns),
        "model_ipc": float(sysres["ipc"]), "model_llc_mpki": float(sysres["llc_mpki"]),
        "llc_miss_rate": float(sysres["llc_miss_rate"]),
        "llc_pages": int(len(pages)),
        "footprint_bytes": int(round(curve.distinct)) * curve.unit_bytes,  # distinct lines touched
        "llc_accesses": prof.accesses, "llc_misses": prof.misses,
        "privileged_share": (meta.get("privileged_records") or 0) / max(1, meta["records"]),
        # The kernel's share of the instructions (Nellans et al. Figure 1): from the guest tasks'
        # counts of a full-system trace; a user-mode trace runs no kernel code (0).
        "privileged_instruction_share": float(meta.get("privileged_instruction_share", 0.0)),
        "kernel_code": bool(meta.get("kernel_code")),
        "guest_tasks": meta.get("guest_tasks"),
        "mrc": {"method": curve.method, "sizes_bytes": [int(x) * curve.unit_bytes for x in curve.sizes],
                "miss_rate": [float(x) for x in curve.miss_rate]},
        "pages_histogram": [int(x) for x in prof.histogram(bins=10)["pages"]],
        # Which trace these figures are of: a re-captured region makes them stale.
        "records_hash": meta.get("records_hash"),
    }
    _output.write_json(d / "characterization.json", ch)
    if plot_dir is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
        curve.plot(ax=axes[0], label=w.name)
        axes[0].set_title(f"{w.name}: miss-ratio curve (lines)")
        prof.plot_histogram(ax=axes[1])
        axes[1].set_title(f"LLC miss rate per page ({machine})")
        prof.plot_address_space(ax=axes[2])
        axes[2].set_title("pages in address order")
        fig.tight_layout()
        plot_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(plot_dir / f"{w.name}.png", dpi=80)
        plt.close(fig)
    return ch


def region_text(m: dict[str, Any]) -> str:
    """How a built trace's region was chosen and how long it is, for the suite table."""
    c = m.get("region_choice") or {}
    if m.get("capture") == "system":
        start = "exec (full system)"
    elif c.get("method") == "simpoint" and c.get("intervals"):
        start = (f"phase: {m['skip']:,} (interval {c['chosen_interval']} of {c['intervals']}, k={c['k']}, "
                 f"dominant {c['weights'][c['dominant_cluster']]:.0%})")
    elif c.get("method") == "simpoint":
        start = "phase: 0 (shorter than one interval)"
    else:
        start = f"fixed: {m['skip']:,}"
    length = (f"{m['instructions_requested']:,} instructions" if m.get("instructions_requested")
              else f"{m.get('records_requested') or 0:,} records")
    return f"{start} / {length}"


def characterization(w: Workload, meta: dict[str, Any], root: Optional[Path] = None) -> dict[str, Any]:
    """``w``'s characterization if it is of the trace ``meta`` describes, else ``{}`` (a
    re-captured region leaves the old figures stale: they are not shown as the new trace's)."""
    cp = wdir(w, root) / "characterization.json"
    c = json.loads(cp.read_text()) if cp.exists() else {}
    return c if c and c.get("records_hash") == meta.get("records_hash") else {}


def suite_table(root: Optional[Path] = None) -> str:
    """The docs/workloads.md suite table (Markdown) of what is built and characterized."""
    from .tables import pipe_table

    head = ["program", "class", "stands in for (the paper's figure)", "packages (version)", "input", "region: start / length",
            "records", "instructions", "IPC", "LLC MPKI", "privileged", "footprint", "trace hash", "capture s"]
    numeric = [False] * 6 + [True] * 6 + [False, True]
    rows: list[list[str]] = []
    for w in SUITE:
        m = info(w, root)
        if m is None:
            rows.append([w.name, w.cls, w.stands_in or "-", ", ".join(w.packages), w.input_desc, "", "not built"] + [""] * 7)
            continue
        c = characterization(w, m, root)
        pk = ", ".join(f"{p} {v}" for p, v in m["packages"].items())
        fp = f"{c['footprint_bytes'] / 2**20:.2f} MiB" if c else ""
        system = m.get("capture") == "system"
        # Privileged share of the instructions: the kernel's in a full-system trace; none in user mode.
        priv = f"{100 * m.get('privileged_instruction_share', 0.0):.1f}%"
        why = "" if m.get("reproducible") else (" (not reproducible: plain full-system capture)" if system else " (threads)")
        rows.append([w.name, w.cls, w.stands_in or "-", pk, w.input_desc, region_text(m), f"{m['records']:,}",
                     f"{m['instructions']:,}", f"{c['ipc']:.3f}" if c else "not characterized", f"{c['llc_mpki']:.2f}" if c else "",
                     priv, fp, f"`{m.get('records_hash', '?')[:12]}`{why}", str(m["capture_seconds"])])
    return pipe_table(head, rows, numeric) + "\n"


def write_table(doc: Path, root: Optional[Path] = None) -> None:
    """Replace the text between ``<!-- suite-table -->`` and ``<!-- /suite-table -->`` in ``doc``."""
    text = doc.read_text()
    a, b = "<!-- suite-table -->", "<!-- /suite-table -->"
    i, j = text.index(a) + len(a), text.index(b)
    _output.write_text(doc, text[:i] + "\n" + suite_table(root) + text[j:])


# ---- command line (cachecolor workloads ...) -----------------------------------------------

def cli(args: Any, error: Callable[[str], Exception]) -> int:
    """``cachecolor workloads list|install|build|info|characterize``; ``error`` makes the CLI's
    bad-input exception (exit 2)."""
    names = list(getattr(args, "names", None) or [])
    try:
        chosen = tuple(by_name(n) for n in names) if names else SUITE
    except KeyError as e:
        raise error(str(e.args[0])) from None
    root = Path(args.cache) if getattr(args, "cache", None) else None
    if args.workloads_cmd == "list":
        from .tables import text_table

        rows = []
        for w in chosen:
            start = "exec (system)" if w.capture == "system" else "by phase" if w.region_by == "phase" else f"{w.skip:,}"
            length = f"{w.length:,} records" if w.capture == "system" else f"{w.length:,} instructions"
            rows.append([w.name, w.cls, " ".join(w.packages), f"{start} / {length}", w.input_desc])
        print("\n".join(text_table(["name", "class", "packages", "region (start / length)", "input"], rows, left=5, rule=False)))
        return 0
    if args.workloads_cmd == "install":
        errors = install(chosen)
        for p, e in errors.items():
            print(f"{p}: {e}", file=sys.stderr)
        return 0
    if args.workloads_cmd == "build":
        kw: dict[str, Any] = {"root": root, "force": args.force}
        if args.ci:
            if names and any(n not in CI_SUBSET for n in names):
                raise error(f"--ci: the CI subset is {', '.join(CI_SUBSET)}")
            res = {}
            for n, (skip, recs) in CI_SUBSET.items():
                if not names or n in names:
                    res.update(build_all([n], skip=skip, records=recs, **kw))
        else:
            if args.skip is not None:
                kw["skip"] = args.skip
            if args.records is not None:
                kw["records"] = args.records
            if getattr(args, "instructions", None) is not None:
                kw["instructions"] = args.instructions
            res = build_all([w.name for w in chosen], **kw)
        failed = [n for n, m in res.items() if "error" in m]
        print(f"{len(res) - len(failed)} built, {len(failed)} skipped" + (f" ({', '.join(failed)})" if failed else ""))
        return 0
    if args.workloads_cmd == "info":
        for w in chosen:
            m = info(w, root)
            doc = {"name": w.name, "built": m is not None, **(m or {})}
            if m is not None:  # how the region was chosen, in one line, before the details
                doc = {"name": w.name, "built": True, "region": region_text(m), **m}
            print(json.dumps(doc, indent=2))
        return 0
    if args.workloads_cmd == "characterize":
        for w in chosen:
            if info(w, root) is None:
                print(f"{w.name:8} SKIPPED: not built", file=sys.stderr)
                continue
            try:
                c = characterize(w, root=root, plot_dir=Path(args.plots) if args.plots else None)
            except Exception as e:  # noqa: BLE001 -- report and go on with the others
                print(f"{w.name:8} FAILED: {e}", file=sys.stderr)
                continue
            print(f"{w.name:8} IPC {c['ipc']:.3f}  LLC MPKI {c['llc_mpki']:8.3f}  footprint {c['footprint_bytes'] / 2**20:7.2f} MiB  "
                  f"privileged {c['privileged_instruction_share']:.3f} of instructions, {c['privileged_share']:.3f} of records")
        if args.markdown:
            write_table(Path(args.markdown), root)
        return 0
    raise error(f"unknown workloads command {args.workloads_cmd!r}")
