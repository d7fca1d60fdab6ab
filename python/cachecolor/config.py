"""Configs: load a simulation config from a TOML/JSON file or a dict and get it back checked.

Contract: ``load_config`` never interprets a config itself. It hands the text to the Rust core,
which parses strictly (unknown keys are errors), checks every cross-field rule and returns the
*effective* config, every default filled in, as a plain dict. That dict is what ``simulate``
sends back to Rust and what results record under ``config``, so a result always carries the
exact config it ran. Errors are ``cachecolor.ConfigError`` whose message starts with the field
path (``hierarchy.levels[1].ways: ...``) and whose ``.field`` holds it.

The shape (TOML)::

    [hierarchy]                 # cores, line_size, page_size, inclusion, seed, prefetch_enabled
    [[hierarchy.levels]]        # name, size, ways, policy, serves, shared, write_policy, ...
    [workload]                  # optional: seed, repeat
    [[workload.phases]]         # pattern, footprint, references, ...
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

from . import _core

ConfigSource = Union[str, "os.PathLike[str]", Mapping[str, Any]]


def load_config(source: ConfigSource) -> dict[str, Any]:
    """Load and check a config; return the effective config as a dict.

    ``source`` is a path to a ``.toml`` file (or ``.json``), or a mapping with the same shape
    (``{"hierarchy": {...}, "workload": {...}}``). Raises ``ConfigError`` for an invalid
    config and ``OSError`` (e.g. ``FileNotFoundError``) when the file cannot be read.
    """
    if isinstance(source, Mapping):
        text, fmt = json.dumps(source), "json"
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        text = read_config_text(path)
        fmt = "json" if path.suffix.lower() == ".json" else "toml"
    else:
        raise TypeError(f"a config is a path or a dict, not {type(source).__name__}")
    return json.loads(_core.effective_config(text, fmt))


#: The most a file read as a config may hold (a system or cache config, a sweep spec, a workload
#: or machine file, a result to replot). A hand-written config is kilobytes; without a bound,
#: ``simulate /dev/zero`` read until memory ran out and ``/dev/urandom`` never ended.
CONFIG_MAX_BYTES = 16 << 20


def read_config_bytes(path: Union[str, "os.PathLike[str]"], what: str = "config") -> bytes:
    """At most ``CONFIG_MAX_BYTES`` of the file at ``path``; a longer file (or an endless one:
    a device, ``/proc``) is a ``ConfigError`` naming it, after reading no more than the bound.
    An unreadable file is an ``OSError`` that names the path."""
    try:
        with open(path, "rb") as f:
            data = f.read(CONFIG_MAX_BYTES + 1)
    except OSError as e:
        if e.filename is None:  # a failing read() names no file: name it
            raise OSError(e.errno, e.strerror, os.fspath(path)) from None
        raise
    if len(data) > CONFIG_MAX_BYTES:
        raise _core.ConfigError(f"{os.fspath(path)}: more than {CONFIG_MAX_BYTES >> 20} MiB; a {what} is at most "
                                f"{CONFIG_MAX_BYTES >> 20} MiB of text")
    return data


def read_config_text(path: Union[str, "os.PathLike[str]"], what: str = "config") -> str:
    """A config file's text, bounded (``read_config_bytes``); a file that is not UTF-8 is a
    ``ConfigError`` naming the byte (the error contract: bad input is one line, never a
    UnicodeDecodeError)."""
    data = read_config_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _core.ConfigError(f"{os.fspath(path)}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r}); "
                                f"a {what} is TOML or JSON text") from None


def parse_toml(text: str, where: str) -> Any:
    """``text`` read as TOML (Python's ``tomllib``); every way it can fail is a ``ConfigError``
    starting with ``where``: a syntax error, runaway nesting, and an integer longer than Python
    converts (``sys.get_int_max_str_digits``, 4,300 digits), which ``tomllib`` raises as a bare
    ``ValueError``."""
    from ._compat import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _core.ConfigError(f"{where}: {e}") from None
    except RecursionError:
        raise _core.ConfigError(f"{where}: nested too deeply to read") from None
    except ValueError as e:
        raise _core.ConfigError(f"{where}: {e}: a number has at most {max_int_digits()} digits") from None


def max_int_digits() -> int:
    import sys

    return sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300


def with_seed(config: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """A copy of ``config`` whose hierarchy (random replacement) and workload use ``seed``."""
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed {seed}: expected 0 <= seed < 2**64")
    out = copy.deepcopy(dict(config))
    out["hierarchy"]["seed"] = int(seed)
    if out.get("workload") is not None:
        out["workload"]["seed"] = int(seed)
    return out


def load_cache_config(source: ConfigSource) -> dict[str, Any]:
    """The effective cache-only config of any config ``cachecolor simulate`` accepts: a
    cache-only config (``[hierarchy]``) as ``load_config`` returns it, or a config with a
    ``[machine]`` (a preset by name, ``preset = "detect"``, a whole table as ``cachecolor machine
    --detect`` prints, or a system config with ``[[processes]]``): that machine's caches, one chip
    (``presets.machine_hierarchy``). What ``annotate`` and ``--objects`` run a trace through."""
    from .system import is_system_config, load_system_config

    raw = source if isinstance(source, Mapping) else load_system_config(source)
    if isinstance(raw, Mapping) and is_system_config(raw):
        from .presets import machine_hierarchy

        return machine_hierarchy(raw["machine"])
    return load_config(source)
