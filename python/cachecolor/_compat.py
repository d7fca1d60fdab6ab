"""What differs between the Python versions cachecolor supports (3.9 and later), in one place.

- ``tomllib``: the standard library's TOML reader from 3.11; on 3.9 and 3.10 the ``tomli``
  package, from which it was taken (same API, same errors). pyproject.toml depends on ``tomli``
  only where ``python_version < "3.11"``.
"""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised by the wheel test under the lowest supported Python
    import tomli as tomllib

__all__ = ["tomllib"]
