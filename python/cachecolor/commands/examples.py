"""`cachecolor examples`: where the bundled example configs are."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, CliError


def add_parser(sub: Any) -> None:
    ex = sub.add_parser(
        "examples",
        help="print where the bundled example configs are (e.g. cachecolor simulate --policy rocs \"$(cachecolor examples rocs/art.toml)\")",
    )
    ex.add_argument("name", nargs="?", metavar="NAME", help="a file or directory inside them (rocs/art.toml, oscache, ...)")
    ex.set_defaults(func=cmd_examples)


def cmd_examples(args: argparse.Namespace) -> int:
    """Where the bundled examples are (data.py): the directory, or the file NAME inside it."""
    from ..data import example, examples_dir

    root = examples_dir()
    if root is None:
        raise CliError("the bundled examples are missing from this installation (reinstall cachecolor)", EXIT_FAILURE)
    if args.name is None:
        print(root)
        return EXIT_OK
    path = example(*Path(args.name).parts)
    if not path.exists():
        names = ", ".join(sorted(d.name for d in root.iterdir() if d.is_dir()))
        raise CliError(f"{args.name}: no such bundled example (directories: {names})", EXIT_BAD_INPUT)
    print(path)
    return EXIT_OK
