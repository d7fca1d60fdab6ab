"""``simulate``: run a trace file, the config's synthetic workload, or in-memory records through
a cache hierarchy and get a ``Result``.

Contract:
- ``config`` is anything ``load_config`` takes (a path or a dict); it is checked by the Rust
  core before anything runs, and the result records the effective config it ran.
- ``trace`` is a path (read in ``trace_format``, streamed block by block), ``None`` (the
  config's ``[workload]``), or records in memory: an address array, a DataFrame, a structured
  array or a dict of columns (see ``cachecolor.records``). Address-only records are 1-byte
  loads, so each touches exactly one cache line.
- The simulation runs in Rust with the GIL released. ``progress`` (optional) is called with a
  ``Progress`` once per block of 65,536 records; an exception it raises stops the run and
  propagates, as does Ctrl-C.
- Same config, seed and trace give bit-identical results.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, NamedTuple, Optional

from . import _core
from .config import ConfigSource, load_config, with_seed
from .records import to_columns
from .results import Result


class Progress(NamedTuple):
    """How far a run has got: records so far, input bytes read, and the totals when known."""

    records: int
    bytes: int
    total_bytes: Optional[int]
    total_records: Optional[int]

    @property
    def fraction(self) -> Optional[float]:
        """Completed fraction in [0, 1], from records or bytes, or None when unknown."""
        if self.total_records:
            return min(1.0, self.records / self.total_records)
        if self.total_bytes:
            return min(1.0, self.bytes / self.total_bytes)
        return None


def _wrap_progress(progress: Optional[Callable[[Progress], Any]]) -> Optional[Callable[..., Any]]:
    if progress is None:
        return None
    if getattr(progress, "_cachecolor_raw", False):
        return progress  # already takes the raw (records, bytes, total_bytes, total_records)
    return lambda *raw: progress(Progress(*raw))


def simulate(
    config: ConfigSource,
    trace: Any = None,
    trace_format: str = "native",
    progress: Optional[Callable[[Progress], Any]] = None,
    *,
    seed: Optional[int] = None,
    kinds: Any = None,
    sizes: Any = None,
    threads: Any = None,
) -> Result:
    """Simulate and return a ``Result`` (``.levels`` DataFrame, ``.to_dict()``, ...).

    ``seed`` overrides the seeds of the hierarchy (random replacement policies) and workload.
    ``kinds``/``sizes``/``threads`` give extra columns when ``trace`` is an address array.
    """
    cfg = load_config(config)
    if seed is not None:
        cfg = with_seed(cfg, seed)
    text = json.dumps(cfg)
    cb = _wrap_progress(progress)
    if trace is None or isinstance(trace, (str, os.PathLike)):
        if any(c is not None for c in (kinds, sizes, threads)):
            raise ValueError("kinds=, sizes= and threads= go with in-memory addresses, not a trace file")
        doc = _core.simulate(text, None if trace is None else os.fspath(trace), trace_format, cb)
    else:
        cols = to_columns(trace, kinds=kinds, sizes=sizes, threads=threads)
        doc = _core.simulate_arrays(
            text,
            cols["addr"],
            cols.get("kind"),
            cols.get("size"),
            cols.get("thread"),
            cols.get("icount"),
            cols.get("privileged"),
            cb,
        )
    return Result(json.loads(doc))
