"""`cachecolor demo`: trace a small program and simulate it on this machine's caches."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ._common import BACKENDS, _quiet


def add_parser(sub: Any) -> None:
    d = sub.add_parser("demo", help="trace a small program and simulate it on this machine's caches")
    d.add_argument("--out", default=os.path.join("out", "demo"), metavar="DIR", help="output directory (default: out/demo)")
    d.add_argument("--backend", choices=BACKENDS, default="auto", help="capture backend (default: auto)")
    d.add_argument("--source", metavar="DIR", help="directory with the demo's C program (default: examples/demo)")
    _quiet(d)
    d.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    return run_demo(out_dir=args.out, backend=args.backend, source_dir=args.source, quiet=args.quiet)
