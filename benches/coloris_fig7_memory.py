"""COLORIS section 4.2, Figure 7 (the isolation experiment) under both memory models
(docs/system.md "Memory bandwidth and queueing", docs/coloris.md).

For each foreground shape (gobmk's `sensitive`, omnetpp's `hungry`, hmmer's `insensitive`) and
each background mix (H, M, L), the foreground's cycles with coloring (`static`: X + P) against
running alone in its quarter (S), and without coloring (`linux`: X) against running alone with
the whole cache (F). The paper's largest variation with coloring: 5% (gobmk), 55% (omnetpp),
0.5% (hmmer). Run with `fixed` (every read 128 cycles whatever the load: coloring isolates the
cache, and nothing else is shared) and `queued` (the E5506's three DDR3-800 channels, 19.2 GB/s,
shared by the four cores).

    .venv/bin/python benches/coloris_fig7_memory.py
"""

import sys
from pathlib import Path

import cachecolor
from cachecolor._compat import tomllib

ROOT = Path(__file__).resolve().parent.parent / "examples" / "coloris"
SHAPES = {
    "sensitive": ("isolation-alone.toml", ["isolation-heavy.toml", "isolation-medium.toml", "isolation-light.toml"]),
    "hungry": (
        "isolation-alone-hungry.toml",
        ["isolation-heavy-hungry.toml", "isolation-medium-hungry.toml", "isolation-light-hungry.toml"],
    ),
    "insensitive": (
        "isolation-alone-insensitive.toml",
        ["isolation-heavy-insensitive.toml", "isolation-medium-insensitive.toml", "isolation-light-insensitive.toml"],
    ),
}
PAPER = {"sensitive": 5.0, "hungry": 55.0, "insensitive": 0.5}


def cycles(path: Path, policy: str, model: str, shape: str) -> tuple:
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    cfg.setdefault("machine", {}).setdefault("memory", {})["model"] = model
    r = cachecolor.simulate_system(cfg, policy=policy).process(shape)
    return r["cycles"], r["stalls"]["bandwidth"]


def main() -> None:
    print("| foreground | model | S / F (M cycles) | H+P / M+P / L+P | H / M / L | largest variation with coloring (paper) | without | bandwidth stall of the foreground under H+P |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for shape, (alone, mixes) in SHAPES.items():
        for model in ("fixed", "queued"):
            s, _ = cycles(ROOT / alone, "static", model, shape)
            f, _ = cycles(ROOT / alone, "linux", model, shape)
            with_p = [cycles(ROOT / m, "static", model, shape) for m in mixes]
            without = [cycles(ROOT / m, "linux", model, shape)[0] for m in mixes]
            vp = max(abs(c - s) / s for c, _ in with_p) * 100
            vn = max(abs(c - f) / f for c in without) * 100
            bw = with_p[0][1] / with_p[0][0] * 100
            print(
                f"| {shape} | {model} | {s / 1e6:.2f} / {f / 1e6:.2f} | "
                + " / ".join(f"{c / 1e6:.2f}" for c, _ in with_p)
                + " | "
                + " / ".join(f"{c / 1e6:.2f}" for c in without)
                + f" | {vp:.1f}% ({PAPER[shape]}%) | {vn:.1f}% | {bw:.1f}% |",
                flush=True,
            )
            print(f"# {shape} {model} done", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
