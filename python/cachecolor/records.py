"""Records in memory: turn what a user has (an address array, a DataFrame, a structured array, a
dict of columns) into the contiguous NumPy columns the Rust core reads, and back.

Columns and their dtypes (the same as the native trace's record fields)::

    addr        uint64   address
    kind        uint8    0 load, 1 store, 2 ifetch, 3 modify (names and lackey letters accepted)
    size        uint16   bytes accessed, >= 1 (default 1: one address touches exactly one line)
    thread      uint32   thread id (default 0)
    icount      uint32   instructions since the thread's previous record (default 0)
    privileged  bool     kernel-mode reference (default False)
    syscall     uint32   syscall identity on the first record of a privileged run, else 0
                         (number << 22 | 22-bit argument hash; docs/trace-format.md)

Contract: ``to_columns`` validates (lengths, kind names, non-negative addresses) and raises
``ValueError`` naming the column; it copies only when the input's dtype or layout differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

KIND_NAMES: tuple[str, ...] = ("load", "store", "ifetch", "modify")
_KIND_ALIASES = {
    "load": 0, "l": 0, "r": 0, "read": 0,
    "store": 1, "s": 1, "w": 1, "write": 1,
    "ifetch": 2, "i": 2, "instr": 2, "instruction": 2,
    "modify": 3, "m": 3,
}
COLUMNS = ("addr", "kind", "size", "thread", "icount", "privileged", "syscall")
DTYPES = {
    "addr": np.dtype("<u8"),
    "kind": np.dtype("u1"),
    "size": np.dtype("<u2"),
    "thread": np.dtype("<u4"),
    "icount": np.dtype("<u4"),
    "privileged": np.dtype("u1"),
    "syscall": np.dtype("<u4"),
}
RECORD_DTYPE = np.dtype(
    [
        ("addr", "<u8"),
        ("kind", "u1"),
        ("size", "<u2"),
        ("thread", "<u4"),
        ("icount", "<u4"),
        ("privileged", "?"),
        ("syscall", "<u4"),
    ]
)


def kind_codes(values: Any) -> np.ndarray:
    """Kind codes (uint8) from integer codes, names ("load", ...) or letters ("L", "S", "I", "M")."""
    try:
        import pandas as pd

        if isinstance(values, (pd.Series, pd.Categorical)) and isinstance(
            getattr(values, "dtype", None), pd.CategoricalDtype
        ):
            values = np.asarray(values.astype(str) if isinstance(values, pd.Series) else values.astype(str))
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        if arr.size and (arr.min() < 0 or arr.max() > 3):
            bad = arr[(arr < 0) | (arr > 3)][0]
            raise ValueError(f"kind code {bad}: expected 0 (load), 1 (store), 2 (ifetch) or 3 (modify)")
        return np.ascontiguousarray(arr, dtype=np.uint8)
    if arr.dtype.kind in "USO":
        names, inverse = np.unique(arr.astype(str), return_inverse=True)
        codes = []
        for name in map(str, names):
            code = _KIND_ALIASES.get(name.strip().lower())
            if code is None:
                raise ValueError(f"unknown kind {name!r}: expected one of {', '.join(KIND_NAMES)}")
            codes.append(code)
        return np.asarray(codes, dtype=np.uint8)[inverse.reshape(arr.shape)]
    raise ValueError(f"kinds of dtype {arr.dtype} are not understood: use codes 0-3 or names")


def _column(name: str, values: Any, n: Optional[int]) -> np.ndarray:
    if name == "kind":
        arr = kind_codes(values)
    else:
        arr = np.asarray(values)
        if arr.dtype.kind == "f":
            raise ValueError(f"{name}: floating-point values given; use integers")
        if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
            raise ValueError(f"{name}: negative values are not allowed")
        if name == "size" and arr.size and (arr.min() < 1 or arr.max() > 65535):
            raise ValueError("size: each reference is 1..=65535 bytes")
        arr = np.ascontiguousarray(arr, dtype=DTYPES[name])
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if n is not None and len(arr) != n:
        raise ValueError(f"{name} has {len(arr)} elements but addr has {n}")
    return arr


def to_columns(records: Any, **extra: Any) -> dict[str, np.ndarray]:
    """Normalise ``records`` (and optional ``kinds=``, ``sizes=``, ``threads=``, ``icounts=``,
    ``privileged=`` arrays) into a dict of contiguous columns; ``addr`` is always present."""
    cols: dict[str, Any] = {}
    try:
        import pandas as pd

        is_frame = isinstance(records, pd.DataFrame)
    except ImportError:  # pragma: no cover
        is_frame = False
    if is_frame or isinstance(records, Mapping):
        keys = list(records.keys())
        for k in keys:
            name = {"address": "addr", "addresses": "addr"}.get(k, k)
            if name == "pc":
                raise ValueError(
                    "column 'pc' (a v3 trace's instruction addresses, from read_trace) cannot be "
                    "written yet: drop it first (frame.drop(columns='pc'))"
                )
            if name not in COLUMNS:
                raise ValueError(f"unknown record column {k!r}: expected some of {', '.join(COLUMNS)}")
            cols[name] = records[k]
    elif isinstance(records, np.ndarray) and records.dtype.names:
        for k in records.dtype.names:
            if k not in COLUMNS:
                raise ValueError(f"unknown record field {k!r}: expected some of {', '.join(COLUMNS)}")
            cols[k] = records[k]
    else:
        cols["addr"] = records
    plural = {
        "kinds": "kind",
        "sizes": "size",
        "threads": "thread",
        "icounts": "icount",
        "privileged": "privileged",
        "syscalls": "syscall",
    }
    for key, value in extra.items():
        if key not in plural:
            raise TypeError(f"unexpected keyword {key!r}")
        if value is not None:
            cols[plural[key]] = value
    if "addr" not in cols:
        raise ValueError("records need an 'addr' column")
    addr = _column("addr", cols.pop("addr"), None)
    out = {"addr": addr}
    for name, values in cols.items():
        out[name] = _column(name, values, len(addr))
    return out


def from_columns(raw: Mapping[str, bytes], as_: str = "frame") -> Any:
    """Build a DataFrame (``as_="frame"``) or structured array (``as_="array"``) from the
    little-endian ``bytes`` columns ``_core.read_trace`` returns."""
    n = len(raw["addr"]) // 8
    arr = np.empty(n, dtype=RECORD_DTYPE)
    for name in COLUMNS:
        if name in raw:
            arr[name] = np.frombuffer(raw[name], dtype=DTYPES[name], count=n)
        else:
            arr[name] = 0
    if as_ == "array":
        return arr
    if as_ != "frame":
        raise ValueError(f"as_={as_!r}: expected 'frame' or 'array'")
    import pandas as pd

    frame = pd.DataFrame(
        {
            "addr": arr["addr"],
            "kind": pd.Categorical.from_codes(arr["kind"].astype(np.int8), categories=list(KIND_NAMES)),
            "size": arr["size"],
            "thread": arr["thread"],
            "icount": arr["icount"],
            "privileged": arr["privileged"],
            "syscall": arr["syscall"],
        }
    )
    if raw.get("pc") is not None:
        # The instruction that made each record (native version 3; 0 = unknown).
        frame["pc"] = np.frombuffer(raw["pc"], dtype="<u8", count=n)
    return frame
