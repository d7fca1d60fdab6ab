"""Files that ship inside the package: the example configs (machines, workloads, the papers'
scenarios) and the demo's C program, found from any working directory.

One source of truth: the repository's top-level ``examples/`` directory. The package holds it as
``cachecolor/examples``, a symbolic link in the checkout (so ``make build``'s editable install
reads the repository's files); pyproject.toml's ``[tool.maturin] include`` packs the files
behind it into the wheel as real files at ``cachecolor/examples/``. Machine presets need nothing here: they are compiled into the
extension (crates/sim/src/system/presets.rs).

Contract: ``examples_dir()`` is the directory of the bundled examples, or ``None`` if the
installation lost it; ``example(*parts)`` a path inside it (which may not exist).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

_EXAMPLES = Path(__file__).resolve().parent / "examples"


def examples_dir() -> Optional[Path]:
    """The bundled examples (``cachecolor examples`` prints it), or None if missing."""
    return _EXAMPLES if _EXAMPLES.is_dir() else None


def example(*parts: str) -> Path:
    """A path inside the bundled examples, e.g. ``example("rocs", "art.toml")``."""
    return _EXAMPLES.joinpath(*parts)
