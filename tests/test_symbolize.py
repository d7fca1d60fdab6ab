"""`_core.symbolize` (annotate's PCs to function, file and line) against binutils' and LLVM's
`addr2line -f -C` on programs compiled here: every byte address of the programs' own code,
inlined functions, C++ names, and debug information moved to a separate file named by a debug
link. Skipped without a C++ compiler and binutils; LLVM's tool is compared where installed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cachecolor import _core

PROG = r"""
#include <stdio.h>
namespace pack {
template <typename T> struct Box { T v; __attribute__((noinline)) T twice(T k) const { return v * k + k; } };
}
static inline __attribute__((always_inline)) long mix(long a, long b) {
    return (a << 3) ^ (b >> 2) ^ (a * b);
}
__attribute__((noinline)) long walk(const long *xs, long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += mix(xs[i], i);
    return s;
}
int main(int argc, char **argv) {
    static long xs[64];
    for (long i = 0; i < 64; i++) xs[i] = i * argc;
    pack::Box<long> b{argc};
    printf("%ld %ld\n", walk(xs, 64), b.twice(3));
    return 0;
}
"""

have_tools = all(shutil.which(t) for t in ("c++", "addr2line", "nm", "objcopy", "strip"))
needs_tools = pytest.mark.skipif(not have_tools, reason="a C++ compiler and binutils are needed")


def own_code(exe: Path) -> list[int]:
    """Every byte address of the functions the program defines itself (``nm -S``)."""
    out = subprocess.run(["nm", "-S", "-C", "--defined-only", str(exe)], capture_output=True, text=True,
                         check=True).stdout
    addrs: list[int] = []
    for line in out.splitlines():
        f = line.split(maxsplit=3)
        if len(f) == 4 and f[2] in "tT" and any(n in f[3] for n in ("walk", "main", "twice")):
            start, size = int(f[0], 16), int(f[1], 16)
            addrs.extend(range(start, start + size))
    return addrs


def tool_places(tool: str, exe: Path, addrs: list[int]) -> list[tuple[str, str, int]]:
    """(function, file's base name, line) of each address by ``tool -f -C``."""
    text = "\n".join(hex(a) for a in addrs) + "\n"
    out = subprocess.run([tool, "-f", "-C", "-e", str(exe)], input=text, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    res = []
    for i in range(len(addrs)):
        loc = out[2 * i + 1].split(" (discriminator")[0]
        file, _, line = loc.rpartition(":")
        res.append((out[2 * i], os.path.basename(file), int(line) if line.isdigit() else 0))
    return res


def ours(exe: Path, addrs: list[int]) -> list[tuple[str, str, int]]:
    return [(f or "??", os.path.basename(file or "??"), line) for f, file, line, _near in _core.symbolize(exe, addrs)]


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("symbolize")
    src = d / "prog.cc"
    src.write_text(PROG)
    exe = d / "prog"
    subprocess.run(["c++", "-g", "-O2", "-o", str(exe), str(src)], check=True)
    return exe


@needs_tools
def test_every_address_of_the_programs_code_is_placed_as_addr2line_places_it(program):
    addrs = own_code(program)
    assert len(addrs) > 100
    got = ours(program, addrs)
    binutils = tool_places("addr2line", program, addrs)
    # Files and lines: binutils' on every address.
    assert [(file, line) for _, file, line in got] == [(file, line) for _, file, line in binutils]
    if shutil.which("llvm-addr2line"):
        # Functions: where the two tools agree, the same; where they do not, one of theirs
        # (binutils names the caller at an inlined call's entry PC where LLVM and DWARF's
        # ranges say the inlined function; LLVM names a clone by its symbol, `(.isra.0)`,
        # where binutils and DWARF name the function).
        llvm = tool_places("llvm-addr2line", program, addrs)
        differ = [(hex(a), g, b, w) for a, g, b, w in zip(addrs, got, binutils, llvm)
                  if g[0] not in {b[0], w[0]} or (b[0] == w[0] and g[0] != b[0])]
        assert not differ, f"{len(differ)} of {len(addrs)} differ, first {differ[:3]}"
        assert sum(b[0] == w[0] for b, w in zip(binutils, llvm)) >= 0.9 * len(addrs)
    else:
        same = sum(g == b for g, b in zip(got, binutils))
        assert same >= 0.95 * len(addrs), f"{len(addrs) - same} of {len(addrs)} functions differ"
    functions = {f for f, _, _ in got}
    # Not vacuous: the inlined function is named where its code is, and C++ names demangled.
    assert "mix" in functions and "walk(long const*, long)" in functions
    assert "pack::Box<long>::twice(long) const" in functions
    assert all(line > 0 for _, _, line in got)


def split_debug(program: Path, d: Path, alt_link: bytes = b"") -> tuple[Path, Path]:
    """``program`` stripped into ``d``, its DWARF and symbols in ``prog.debug`` beside it
    (with a ``.gnu_debugaltlink`` section of ``alt_link`` if given), linked by its CRC."""
    exe, debug = d / "prog", d / "prog.debug"
    shutil.copy(program, exe)
    subprocess.run(["objcopy", "--only-keep-debug", str(exe), str(debug)], check=True)
    if alt_link:
        (d / "alt.bin").write_bytes(alt_link)
        subprocess.run(["objcopy", f"--add-section=.gnu_debugaltlink={d / 'alt.bin'}", str(debug)], check=True)
    subprocess.run(["strip", "--strip-all", str(exe)], check=True)
    subprocess.run(["objcopy", f"--add-gnu-debuglink={debug.name}", str(exe)], check=True, cwd=d)
    return exe, debug


@needs_tools
def test_debug_information_in_a_separate_file_is_found_by_its_debug_link(program, tmp_path):
    """As a distribution ships it: the program stripped, its DWARF and symbols in a file the
    program names in `.gnu_debuglink`, beside it."""
    exe, debug = split_debug(program, tmp_path)
    addrs = own_code(program)
    assert ours(exe, addrs) == ours(program, addrs)
    # Without the debug file, only what the stripped file keeps: no names for its own code,
    # and nothing that fails.
    debug.unlink()
    bare = _core.symbolize(exe, addrs)
    assert all(f is None and line == 0 for f, _file, line, _near in bare)


@needs_tools
def test_a_debug_file_whose_checksum_does_not_match_the_link_is_not_used(program, tmp_path):
    """Another program's debug file under the linked name would name this one's code after
    that program's functions: the link's CRC-32 rejects it, as binutils does."""
    exe, debug = split_debug(program, tmp_path)
    other_src = tmp_path / "other.c"
    other_src.write_text("int gamma_(int x) { return x * 3; }\nint main(void) { return gamma_(1); }\n")
    other = tmp_path / "other"
    subprocess.run(["cc", "-g", "-O0", "-o", str(other), str(other_src)], check=True)
    addrs = own_code(program)
    assert any(f for f, _, _, _ in _core.symbolize(exe, addrs))  # the right file is used
    subprocess.run(["objcopy", "--only-keep-debug", str(other), str(debug)], check=True)
    assert all(f is None and line == 0 for f, _file, line, _near in _core.symbolize(exe, addrs))


@needs_tools
def test_a_supplementary_file_that_does_not_load_leaves_the_debug_files_own_information(program, tmp_path):
    """A debug file naming a supplementary file (`.gnu_debugaltlink`, as `dwz` writes it) that
    is not an object file: the debug file's own DWARF still places every address."""
    (tmp_path / "notes.txt").write_text("not an object file")
    exe, _debug = split_debug(program, tmp_path, alt_link=b"notes.txt\0" + bytes(20))
    addrs = own_code(program)
    assert ours(exe, addrs) == ours(program, addrs)


@needs_tools
def test_an_address_no_symbol_contains_gets_the_nearest_symbol_below(program, tmp_path):
    """A PC past the end of every sized symbol (padding after a function, code of a stub
    without a symbol): no function, and the nearest text symbol below it, as `nm` lists it."""
    exe = tmp_path / "nodebug"
    subprocess.run(["objcopy", "--strip-debug", str(program), str(exe)], check=True)
    out = subprocess.run(["nm", "-S", "--defined-only", str(exe)], capture_output=True, text=True,
                         check=True).stdout
    sized = sorted((int(f[0], 16), int(f[1], 16), f[3]) for f in (line.split(maxsplit=3) for line in out.splitlines())
                   if len(f) == 4 and f[2] in "tT")
    # A byte after a function's end that the next symbol does not start at: alignment padding.
    gaps = [(s + n, name) for (s, n, name), (t, _, _) in zip(sized, sized[1:]) if s + n < t]
    assert gaps, "the program has no padding between its functions"
    addr, before = gaps[0]
    [(function, _file, _line, nearest)] = _core.symbolize(exe, [addr])
    assert function is None and nearest == before


def test_a_file_that_is_not_elf_places_nothing(tmp_path):
    """Needs no tools: a file that is not ELF, or not there, places nothing and fails nowhere."""
    p = tmp_path / "notes.txt"
    p.write_text("not an object file")
    assert _core.symbolize(p, [0x1000]) == [(None, None, 0, None)]
    assert _core.symbolize(tmp_path / "absent", [1, 2]) == [(None, None, 0, None)] * 2
