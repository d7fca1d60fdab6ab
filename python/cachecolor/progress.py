"""Progress display for the CLI: one updating line on a terminal, periodic lines otherwise.

Contract: a ``ProgressLine`` is a callable the Rust core can call directly with its raw
arguments ``(records, bytes, total_bytes, total_records)`` once per block; it redraws at most
ten times a second on a TTY (``\\r`` + the line) and prints a plain line at most every 10 s when
stderr is a file or pipe (CI logs). ``quiet=True`` silences it. ``close()`` ends the line. It
writes only to its stream (stderr by default), never to stdout, so tables and JSON on stdout
stay clean.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO


def _si(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"


class ProgressLine:
    """Callable progress reporter (see module docstring)."""

    _cachecolor_raw = True  # called with the raw tuple, no Progress object per block

    def __init__(self, label: str, *, quiet: bool = False, stream: Optional[TextIO] = None, unit: str = "records"):
        self.label = label
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.unit = unit
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.last = self.start  # nothing for the first interval: short runs stay silent
        self.drawn = False
        self.interval = 0.1 if self.tty else 10.0

    def __call__(self, records: int, bytes_: int = 0, total_bytes: Optional[int] = None, total_records: Optional[int] = None) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if now - self.last < self.interval:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        parts = [f"{self.label}: {_si(records)} {self.unit}"]
        if total_records:
            parts.append(f"{100.0 * records / total_records:.0f}%")
        elif total_bytes:
            parts.append(f"{100.0 * bytes_ / total_bytes:.0f}% of {_si(total_bytes)}B")
        parts.append(f"{_si(records / elapsed)} {self.unit}/s")
        line = ", ".join(parts)
        if self.tty:
            self.stream.write("\r\x1b[K" + line)
            self.drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the progress line (a newline after an updating line)."""
        if self.drawn and not self.quiet:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self.drawn = False
