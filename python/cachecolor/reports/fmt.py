"""Numbers and tables for people: what ``report.md`` and ``report.html`` show.

Contract: ``number`` formats one value (integers with thousands separators up to a million, then
``42.4 M``; other floats with four significant digits and no exponent; NaN and None as ``-``);
``half`` gives an interval's half-width two significant digits; ``bytes_`` writes sizes in KiB / MiB / GiB (every size the CLI and reports print); ``mean_ci`` gives the mean and the half-width of the
95% confidence interval (Student's t, n - 1 degrees of freedom; the t quantiles are tabulated
below and checked against a numerical integration of the t density in tests/test_reports.py);
``markdown_table`` renders a DataFrame as a GitHub pipe table (``x_ci`` columns folded into
``x`` as ``mean ± half``, pipes in cells escaped), so the Markdown renders.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

# t_{0.975, df} for df = 1..30; beyond 30 the normal 1.96 is within 2% of it.
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError("df >= 1")
    return T975[df - 1] if df <= len(T975) else 1.96


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% interval) of ``values``, NaNs left out; the half-width is
    NaN with fewer than two values."""
    xs = [float(v) for v in values if v == v]
    if not xs:
        return math.nan, math.nan
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, math.nan
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, t975(n - 1) * math.sqrt(var / n)


def number(v: Any) -> str:
    """One value for a person (see the module docstring)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    if x != x:
        return "-"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    integral = isinstance(v, numbers.Integral) or (x.is_integer() and abs(x) >= 1000)
    if integral and abs(x) < 1e6:
        return f"{int(x):,}"
    if abs(x) >= 1e6:
        for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
            if abs(x) >= scale:
                return f"{x / scale:.3g} {unit}" if abs(x / scale) < 1000 else f"{x / scale:,.0f} {unit}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if x == 0:
        return "0"
    digits = max(0, 3 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{digits}f}"


def half(v: Any) -> str:
    """An interval's half-width: two significant digits (``0.00015``, ``8,600``, ``1.2 M``)."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    if x != x:
        return "-"
    if x == 0 or abs(x) >= 100:
        r = float(f"{x:.2g}")
        return number(int(r) if abs(r) < 1e6 else r)
    digits = max(0, 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{digits}f}"


def bytes_(n: float, exact: bool = False) -> str:
    """A size in bytes as B / KiB / MiB / GiB (``8 MiB``, ``1.5 KiB``; three significant digits
    where the unit does not divide it). ``exact``: a hardware size, in the largest unit that
    shows it exactly with at most one decimal (``1920 KiB``, not ``1.88 MiB``)."""
    if exact:
        n = int(n)
        for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
            if n >= 1 << shift and (n * 10) % (1 << shift) == 0:
                return f"{n / (1 << shift):g} {unit}"
        return f"{n:,} B"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if float(v).is_integer() else f"{v:.3g} {unit}"
    return f"{n:.0f} B"


def cells(frame: Any) -> tuple[list[str], list[list[str]]]:
    """The header and rows of ``frame`` as text: ``x`` and ``x_ci`` become one ``x`` column
    ``mean ± half`` (just ``mean`` where the interval is NaN)."""
    cols = [c for c in frame.columns if not (str(c).endswith("_ci") and str(c)[:-3] in frame.columns)]
    rows = []
    for rec in frame.to_dict("records"):
        row = []
        for c in cols:
            text = number(rec[c])
            ci = rec.get(f"{c}_ci")
            if ci is not None and ci == ci and f"{c}_ci" in frame.columns:
                # Seeds that agree to the last bits give a rounding error, not an interval.
                mean = rec[c]
                tiny = isinstance(mean, numbers.Real) and mean == mean and abs(ci) <= 1e-12 * abs(mean)
                text += " ± 0" if tiny else f" ± {half(ci)}"
            row.append(text)
        rows.append(row)
    return [str(c) for c in cols], rows


def markdown_table(frame: Any) -> str:
    """``frame`` as a GitHub-flavoured pipe table (``cells``; numbers right-aligned; the writer
    is ``tables.pipe_table``)."""
    from ..tables import pipe_table

    if frame is None or len(frame.columns) == 0:
        return "(no rows)"
    head, rows = cells(frame)
    return pipe_table(head, rows, [frame[c].dtype.kind in "iuf" for c in head])
