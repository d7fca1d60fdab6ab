"""The README's path from one's own program to a verdict, run as the README writes it.

The shell block under "From your own program to a verdict" is taken from README.md itself and
run with bash in an empty directory holding a small C program (a hash table probed at random
beside a scan of a larger array: the shape of a program one would bring), with the venv's
`cachecolor` first on PATH. Every command must succeed, and what each step prints must be about
this program: the simulate table has the preset's levels, annotate names the program's own
functions and its `.bss` arrays, and the report's HTML and Markdown carry a verdict for the
config. So the README cannot drift from what the commands do.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROG = r"""
#include <stdio.h>
#include <stdlib.h>
#define SLOTS (16 * 1024)          /* 16 K slots of 16 bytes: a 256 KiB hash table */
#define SCAN (1024 * 1024)         /* 1 M longs: an 8 MiB array scanned between probes */
struct slot { unsigned long key, value; };
struct slot table[SLOTS];
long scan[SCAN];

__attribute__((noinline)) unsigned long probe(unsigned long key) {
    unsigned long h = (key * 0x9E3779B97F4A7C15ul) >> 50;
    while (table[h].key != 0 && table[h].key != key)
        h = (h + 1) % SLOTS;
    table[h].key = key;
    return ++table[h].value;
}

__attribute__((noinline)) long sweep(long from, long n) {
    long s = 0;
    for (long i = from; i < from + n; i++)
        s += scan[i];
    return s;
}

int main(void) {
    unsigned long x = 12345, sum = 0;
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < 4000; i++) {
            x = x * 6364136223846793005ul + 1442695040888963407ul;
            sum += probe((x >> 33) % 6000 + 1);
        }
        sum += sweep((long)round * (SCAN / 8), SCAN / 8);
    }
    printf("%lu\n", sum);
    return 0;
}
"""


def readme_block() -> str:
    """The shell block of the README's own-program section, exactly as printed there."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## From your own program to a verdict", 1)[1]
    m = re.search(r"```sh\n(.*?)```", section, re.S)
    assert m, "README.md: the own-program section has no ```sh block"
    return m.group(1)


def test_the_readme_block_is_the_five_steps():
    block = readme_block()
    for step in ("cachecolor trace", "cachecolor simulate", "cachecolor annotate", "cachecolor report"):
        assert step in block, step


@pytest.mark.skipif(
    shutil.which("cc") is None or shutil.which("nm") is None
    or (shutil.which("qemu-x86_64") is None and shutil.which("valgrind") is None),
    reason="a C compiler, binutils and qemu-user or valgrind are needed (make tools installs them)",
)
def test_the_readme_own_program_path_runs_end_to_end(tmp_path):
    (tmp_path / "myprog.c").write_text(PROG)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CACHECOLOR_CACHE"] = str(tmp_path / "cache")
    script = "set -euo pipefail\n" + readme_block()
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, f"the README's commands failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    out = done.stdout
    # 2. simulate on the preset: the Xeon E5506's levels
    assert "on the caches of xeon-e5506" in out and "L3" in out
    # 3. annotate names the program's own functions and lines, and its .bss arrays as objects
    assert "probe" in out and "sweep" in out and "myprog.c" in out
    assert re.search(r"^\s*scan\s", out, re.M) and re.search(r"^\s*table\s", out, re.M), out[-4000:]
    # 4./5. the report: a verdict for the config, in both the Markdown and the HTML
    md = (tmp_path / "myreport" / "report.md").read_text()
    html = (tmp_path / "myreport" / "report.html").read_text()
    assert "Verdict" in md and "rocs" in md and "mine" in md
    assert 'class="verdict"' in html
