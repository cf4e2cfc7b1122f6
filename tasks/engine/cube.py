"""The cube: leaves and every segment up to the search depth, from one query, as arrays.

One scan of the base table (joined dimensions through verified many-to-one keys) aggregates rows
into *leaves* (one per combination of all searched dimensions) with per-period sums; a
``GROUPING SETS`` over those leaves then yields every segment of up to ``max_depth`` columns in the
same query (:meth:`~tasks.engine.engine_sql.EngineSql.cube`). Distinct counts are deduplicated
per leaf (and per day for a daily grain) before any grouping set sees them, never counted inside
the grouping sets. The context's reader answers the query from the question's stored cells when
it has them. The search's size (columns, leaves, depth) is judged here before the query runs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from itertools import combinations
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sql_tools import MAX_SEGMENT_COLUMNS, ToolContext, to_sql
from tasks.engine.engine_sql import (
    DAY_STATS,
    STATS,
    EngineSql,
    _filtered_sum,
    _fn,
    period_scales,
)
from tasks.engine.segment_numbers import (
    SegmentQuery,
    daily_series,
    exact_distinct_totals,
    run_segment_query,
    segment_query,
)
from tasks.engine.spec import DEFAULT_DEPTH, Question

__all__ = [
    "DAY_STATS",
    "DEFAULT_DEPTH",
    "GROUPING_SET_BUDGET",
    "LEAF_BUDGET",
    "MAX_DIMENSION_VALUES",
    "MAX_RESULT_ROWS",
    "MAX_SEARCH_COLUMNS",
    "MAX_SEGMENTS",
    "SEGMENT_BUDGET",
    "STATS",
    "Cube",
    "EngineSql",
    "SegmentQuery",
    "_filtered_sum",
    "_fn",
    "auto_depth",
    "build_cube",
    "daily_series",
    "dimension_sizes",
    "estimated_leaves",
    "estimated_segments",
    "exact_distinct_totals",
    "grouping_sets",
    "in_order",
    "run_segment_query",
    "search_depth",
    "segment_query",
    "sorted_codes",
]

MAX_RESULT_ROWS = 6_000_000
MAX_DIMENSION_VALUES = 1000

# --- screening: which columns carry the change, when all of them at once are too many leaves ---

LEAF_BUDGET = 200_000
"""Beyond this many leaves, the columns are screened first (:mod:`tasks.engine.screen`)."""
MAX_SEARCH_COLUMNS = 12
"""Most columns one search combines; more are screened first. To depth 3, twelve columns make
12 + 66 + 220 = 298 grouping sets, within :data:`GROUPING_SET_BUDGET`; every array of the cube
and the search grows with the columns times the segments."""
GROUPING_SET_BUDGET = 300
"""Most grouping sets (segments' column sets) in the cube's query. DuckDB builds a hash table
per grouping set, about 1 MB each even over 420 rows: 298 sets took 290 MB, 793 sets 1.5 GB and
11 s, 696 sets did not fit a 1 GB memory limit."""
MAX_SEGMENTS = 1_000_000
"""Most segments the cube may hold, estimated before its query runs (each costs about 1 kB in
the query's result and the search's arrays)."""


@dataclass
class Cube:
    """Leaves and segments as arrays; period 0 is the baseline, 1 the comparison.

    ``codes`` index into ``values[j]`` for dimension ``j``; ``-1`` marks a dimension a segment does
    not constrain. Statistics are already scaled per day for a daily grain.
    """

    dims: list[str]
    values: list[list[Any]]
    leaf_codes: np.ndarray
    leaf: dict[str, np.ndarray]
    seg_mask: np.ndarray
    seg_codes: np.ndarray
    seg: dict[str, np.ndarray]
    total: dict[str, float]
    sql: str
    params: dict[str, Any]
    elapsed_ms: float
    notes: list[str] = field(default_factory=list)
    # days in the baseline and comparison periods, when leaves carry daily statistics
    days: tuple[float, float] | None = None

    def segment_dict(self, i: int) -> dict[str, Any]:
        """``{column: value}`` of segment ``i``."""
        return {
            self.dims[j]: self.values[j][int(c)] for j, c in enumerate(self.seg_codes[i]) if c >= 0
        }


def build_cube(ctx: ToolContext, q: Question, dims: list[str]) -> Cube:
    """Run the leaves + grouping-sets query and return it as arrays (read from the question's
    stored cells of ``dims`` when the reader has them; the cube keeps the SQL that computes it
    on the source)."""
    depth = q.max_depth or auto_depth(ctx, q, dims)
    sql = EngineSql(ctx, q, dims)
    text = to_sql(sql.cube(depth), ctx.dialect)
    start = time.perf_counter()
    raw = ctx.reader.read_arrow(
        text,
        sql.params.values,
        max_rows=MAX_RESULT_ROWS,
        on_cells=lambda cells: cells.cube_query(q, dims, depth),
    )
    table = in_order(raw, len(dims))
    elapsed = (time.perf_counter() - start) * 1000
    k = len(dims)
    g = _numpy(table.column("__g")).astype(np.int64)
    # GROUPING() sets bit (k-1-j) when dimension j is aggregated away
    grouped = np.zeros((len(g), k), dtype=bool)
    for j in range(k):
        grouped[:, j] = ((g >> (k - 1 - j)) & 1) == 0
    codes = np.full((len(g), k), -1, dtype=np.int64)
    values: list[list[Any]] = []
    notes: list[str] = []
    for j in range(k):
        col = table.column(f"d{j}")
        enc = pc.dictionary_encode(col, null_encoding="encode").combine_chunks()
        idx = _numpy(enc.indices)
        idx = (
            np.where(np.isnan(idx.astype(float)), -1, idx).astype(np.int64)
            if idx.dtype.kind == "f"
            else idx.astype(np.int64)
        )
        vals = enc.dictionary.to_pylist()
        values.append([_plain(v) for v in vals])
        codes[:, j] = np.where(grouped[:, j], idx, -1)
    scale = period_scales(q)
    stats: dict[str, np.ndarray] = {}
    raw = _constant_denominator(table)
    for s in STATS:
        for p, suffix in ((0, "b"), (1, "c")):
            arr = raw[f"{s}{suffix}"]
            if s in ("n", "d"):
                arr = arr / scale[p]
            elif s in ("qn", "qd", "qnd"):
                arr = arr / scale[p] ** 2
            stats[f"{s}{suffix}"] = arr
    for s in DAY_STATS:
        for suffix in ("b", "c"):
            if f"{s}{suffix}" in raw:
                stats[f"{s}{suffix}"] = raw[f"{s}{suffix}"]
    is_leaf = grouped.all(axis=1) if k else np.zeros(len(g), dtype=bool)
    is_total = (~grouped).all(axis=1)
    if k == 0:
        is_total = np.ones(len(g), dtype=bool)
    t = int(np.flatnonzero(is_total)[0]) if is_total.any() else None
    total = {key: float(arr[t]) if t is not None else 0.0 for key, arr in stats.items()}
    # segment 0 is the whole population (the global term); then every segment up to max_depth
    seg_sel = ~is_leaf | (grouped.sum(axis=1) <= depth)
    order = np.concatenate([np.flatnonzero(is_total), np.flatnonzero(seg_sel & ~is_total)])
    seg_sel = order
    return Cube(
        dims=list(dims),
        values=values,
        leaf_codes=codes[is_leaf],
        leaf={key: arr[is_leaf] for key, arr in stats.items()},
        seg_mask=grouped[seg_sel],
        seg_codes=codes[seg_sel],
        seg={key: arr[seg_sel] for key, arr in stats.items()},
        total=total,
        sql=text,
        params=dict(sql.params.values),
        elapsed_ms=elapsed,
        notes=notes,
        days=(
            (float(q.periods.baseline.days), float(q.periods.comparison.days))  # type: ignore[union-attr]
            if sql.by_day
            else None
        ),
    )


def in_order(table: pa.Table, k: int) -> pa.Table:
    """A grouping-sets result sorted by grouping set, then by the dimensions' values.

    A database returns groups in no particular order, and the order becomes the segments'
    numbering, which breaks ties between equal segments (which driver is listed first, which of
    two equal picks is taken). Sorted, the same rows give the same answer on every database and
    on every run.
    """
    order = sorted_codes(table, k)[0].astype(np.int64)
    # the indices wrap the array's buffer: ``pa.array(order)`` would import pandas (see _numpy)
    return table.take(pa.Array.from_buffers(pa.int64(), len(order), [None, pa.py_buffer(order)]))


def sorted_codes(table: pa.Table, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order :func:`in_order` puts ``table``'s rows in, and each row's dimension values as
    codes: ``(order, codes, sizes)``, where ``codes[:, j]`` (in the table's own row order) ranks
    the value of ``d{j}`` among that column's distinct values (ascending, a null after every
    value) and ``sizes[j]`` is how many ranks column j has.

    The sort runs on integer ranks: sorting the rows' values themselves (strings, mostly) costs
    several times as much on the hundreds of thousands of cells a screening query returns.
    """
    n = table.num_rows
    codes = np.zeros((n, k), dtype=np.int64)
    sizes = np.ones(k, dtype=np.int64)
    for j in range(k):
        # a null is one of the dictionary's values, and sorts after every other (Arrow's order)
        enc = pc.dictionary_encode(table.column(f"d{j}"), null_encoding="encode").combine_chunks()
        distinct = len(enc.dictionary)
        rank = np.empty(distinct, dtype=np.int64)
        rank[_numpy(pc.sort_indices(enc.dictionary))] = np.arange(distinct)
        codes[:, j] = rank[_numpy(enc.indices).astype(np.int64)]
        sizes[j] = max(distinct, 1)
    g = _numpy(table.column("__g")).astype(np.int64)
    order = np.lexsort([codes[:, j] for j in reversed(range(k))] + [g]) if n else np.arange(0)
    return order, codes, sizes


def _floats(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numeric column as float64, a null as NaN. Whole-number decimals (a count's ``SUM(1)``)
    are cast by Arrow, not one Python ``Decimal`` at a time; a decimal with a fraction keeps
    Python's correctly rounded conversion."""
    if pa.types.is_decimal(col.type) and col.type.scale != 0:
        return np.array([np.nan if v is None else float(v) for v in col.to_pylist()], dtype=float)
    if not pa.types.is_floating(col.type):
        col = pc.cast(col, pa.float64())
    return _numpy(col).astype(np.float64, copy=False)


def _numpy(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An Arrow array of numbers as a NumPy array (a null as NaN in a float array), its values
    copied from Arrow's buffers directly: Arrow's own conversion first imports pandas (a fifth
    of a second per run) to check for types the engine never reads."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    floating = pa.types.is_floating(t)
    if not (floating or pa.types.is_integer(t)) or (arr.null_count and not floating):
        return arr.to_numpy(zero_copy_only=False)
    kind = "f" if floating else "i" if pa.types.is_signed_integer(t) else "u"
    dtype = np.dtype(f"{kind}{t.bit_width // 8}")
    validity, data = arr.buffers()[:2]
    out = np.frombuffer(data, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)
    out = out.copy()
    if arr.null_count:
        bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
        out[bits[arr.offset : arr.offset + len(arr)] == 0] = np.nan
    return out


def _constant_denominator(table: pa.Table) -> dict[str, np.ndarray]:
    """The statistics of a result as float arrays, completing those of a denominator of 1 per row
    (``d`` = ``qd`` = the row count, ``qnd`` = ``n``) when the query left them out."""
    out: dict[str, np.ndarray] = {}
    for s in (*STATS, *DAY_STATS):
        for suffix in ("b", "c"):
            name = f"{s}{suffix}"
            if name in table.column_names:
                out[name] = np.nan_to_num(_floats(table.column(name)), nan=0.0)
    for suffix in ("b", "c"):
        if f"d{suffix}" not in out:
            out[f"d{suffix}"] = out[f"rows{suffix}"]
            out[f"qd{suffix}"] = out[f"rows{suffix}"]
            out[f"qnd{suffix}"] = out[f"n{suffix}"]
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, datetime | date):
        return v.isoformat()
    if isinstance(v, Decimal):  # HUGEINT and DECIMAL arrive from Arrow as Decimal
        return int(v) if v == v.to_integral_value() else float(v)
    return v


def dimension_sizes(ctx: ToolContext, q: Question, dims: list[str]) -> list[int]:
    """Distinct values per dimension (a null counts as one), from the stored profile."""
    sizes = []
    for d in dims:
        prof = ctx.schema.column_profile(ctx.schema.column(q.metric.table, d))
        if prof is None:
            sizes.append(MAX_DIMENSION_VALUES)
        else:
            sizes.append(max(int(prof.distinct_count), 1) + (1 if prof.null_count else 0))
    return sizes


def estimated_leaves(ctx: ToolContext, q: Question, dims: list[str]) -> int:
    """At most this many leaves: the smaller of the table's rows and the values' cross product."""
    prof = ctx.schema.profile(q.metric.table)
    rows = prof.row_count if prof is not None else None
    space = math.prod(float(x) for x in dimension_sizes(ctx, q, dims))  # inf past 1e308
    return int(min(space, rows if rows is not None else space, float(2**62)))


SEGMENT_BUDGET = 600_000


def auto_depth(ctx: ToolContext, q: Question, dims: list[str]) -> int:
    """The search depth when the question leaves it open: every column (up to
    :data:`MAX_SEGMENT_COLUMNS`) while the segments of all depths stay within
    :data:`SEGMENT_BUDGET`, and at least :data:`DEFAULT_DEPTH` (or every column, if fewer). A
    cause over four or five columns is then named as itself, not as its pieces."""
    k = len(dims)
    if k <= DEFAULT_DEPTH:
        return max(k, 1)
    sizes = dimension_sizes(ctx, q, dims)
    leaves = max(estimated_leaves(ctx, q, dims), 1)
    depth = DEFAULT_DEPTH
    for d in range(1, min(k, MAX_SEGMENT_COLUMNS) + 1):
        if estimated_segments(sizes, leaves, d) > SEGMENT_BUDGET:
            break
        if grouping_sets(k, d) > GROUPING_SET_BUDGET:
            break
        depth = max(depth, d)
    return depth


def grouping_sets(k: int, depth: int) -> int:
    """How many column sets of up to ``depth`` of ``k`` columns the cube's query groups by (the
    leaves and the whole population aside)."""
    return sum(math.comb(k, d) for d in range(1, min(depth, k) + 1))


def estimated_segments(sizes: list[int], leaves: int, depth: int) -> float:
    """At most this many segments of up to ``depth`` columns: per column set, the smaller of its
    values' cross product and the leaves. Call it with few columns (it visits every set)."""
    return sum(
        min(math.prod(float(sizes[j]) for j in c), float(leaves))
        for d in range(1, min(depth, len(sizes)) + 1)
        for c in combinations(range(len(sizes)), d)
    )


def search_depth(ctx: ToolContext, q: Question, dims: list[str]) -> tuple[int, list[str]]:
    """The depth the search goes to over ``dims`` (at most :data:`MAX_SEARCH_COLUMNS`), and a
    note when it is less than the question's ``max_depth`` (else :func:`auto_depth`): lowered
    until the cube's query groups by at most :data:`GROUPING_SET_BUDGET` column sets and holds
    at most :data:`MAX_SEGMENTS` segments (estimated), so its cost is known before it runs."""
    k = len(dims)
    wanted = q.max_depth or auto_depth(ctx, q, dims)
    sizes = dimension_sizes(ctx, q, dims)
    leaves = max(estimated_leaves(ctx, q, dims), 1)

    def too_big(d: int) -> bool:
        return (
            grouping_sets(k, d) > GROUPING_SET_BUDGET
            or estimated_segments(sizes, leaves, d) > MAX_SEGMENTS
        )

    depth = min(wanted, k) if k else wanted
    while depth > 1 and too_big(depth):
        depth -= 1
    if depth >= min(wanted, k):
        return wanted, []
    return depth, [
        f"segments combine at most {depth} columns, not {min(wanted, k)}: {k} columns to depth "
        f"{min(wanted, k)} would take {grouping_sets(k, wanted):,} column sets and up to "
        f"{estimated_segments(sizes, leaves, wanted):,.0f} segments, more than one search holds "
        f"({GROUPING_SET_BUDGET:,} and {MAX_SEGMENTS:,})"
    ]
