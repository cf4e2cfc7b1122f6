"""The same question asked of a draw of ``benchmarks/families.py`` presented differently.

A *variant* rewrites a draw's CSV files and question without changing what they mean (rows or
columns in another order, other column names, one more column of random labels, the metric in
other units) or by swapping the two periods, and says how to read its answer back in the
original's terms. Each variant is loaded with the product's loader and asked with the product's
parser, as :func:`benchmarks.families.run_draw` does, so its answer can be compared with the
original's.
"""

from __future__ import annotations

import csv
import io
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.families import Draw, draw, segment_key
from benchmarks.rca_score import value_text

# rename prefixes: they change the columns' alphabetical order but keep each name's words, so the
# loader's role guesses (``*_id`` is an identifier, ``revenue`` a measure) read them the same way
PREFIXES = ("zz", "aa", "mm", "qq", "bb")
EXTRA_COLUMN = "tag"
EXTRA_VALUES = ("red", "green", "blue", "amber")
SCALES = (0.001, 7.0, 1000.0)
# the column that carries each metric's numerator, scaled by the ``scale`` variants
SCALED = {
    "sum(revenue)": "revenue",
    "sum(sessions)": "sessions",
    "sum(purchases) / sum(sessions)": "purchases",
    "sum(revenue) / sum(orders)": "revenue",
}


@dataclass(frozen=True)
class Case:
    """A draw's files and question as one variant presents them."""

    files: dict[str, str]
    question: dict[str, Any]
    names: dict[str, str]  # the variant's column name -> the original's
    sign: int  # -1 when the periods are swapped


@dataclass(frozen=True)
class Answer:
    """What the engine named, in the original draw's terms: each root cause as all its names
    (segment and aliases, as ``(column, value)`` sets) with the sign of its contribution."""

    causes: frozenset[tuple[frozenset[frozenset[tuple[str, str]]], int]]
    global_shift: bool
    significant: bool

    def text(self) -> str:
        """One line: each cause's first name and sign, then the flags."""
        parts = []
        for names, sign in sorted(self.causes, key=str):
            first = min(names, key=lambda n: (len(n), sorted(n)))
            name = "&".join(f"{c}={v}" for c, v in sorted(first))
            parts.append(("+" if sign > 0 else "-") + name)
        return (
            f"[{', '.join(parts) or 'no cause'}] global_shift={self.global_shift} "
            f"significant={self.significant}"
        )


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _rng(d: Draw, variant: str) -> np.random.Generator:
    """A stream of its own per draw and variant, so a variant is the same every time."""
    return np.random.default_rng([zlib.crc32(f"{d.family}/{variant}".encode()), d.seed])


def _same(d: Draw) -> Case:
    return Case(dict(d.files), dict(d.question), {}, 1)


def _swap(d: Draw) -> Case:
    """The comparison asked as the baseline and the other way round."""
    q = dict(d.question)
    q["baseline"], q["comparison"] = q["comparison"], q["baseline"]
    return Case(dict(d.files), q, {}, -1)


def _shuffle_rows(d: Draw) -> Case:
    rng = _rng(d, "rows")
    files = {}
    for name, text in d.files.items():
        head, *body = _rows(text)
        files[name] = _text([head, *(body[i] for i in rng.permutation(len(body)))])
    return Case(files, dict(d.question), {}, 1)


def _shuffle_columns(d: Draw) -> Case:
    rng = _rng(d, "columns")
    files = {}
    for name, text in d.files.items():
        rows = _rows(text)
        order = rng.permutation(len(rows[0]))
        files[name] = _text([[r[i] for i in order] for r in rows])
    return Case(files, dict(d.question), {}, 1)


def _rename(d: Draw) -> Case:
    """Every column gets a prefix drawn per column name (the same name in every file, so the
    join key still joins), and the question names the new columns."""
    rng = _rng(d, "rename")
    heads = {name: _rows(text)[0] for name, text in d.files.items()}
    old = sorted({c for h in heads.values() for c in h})
    new = {c: f"{PREFIXES[int(rng.integers(len(PREFIXES)))]}_{c}" for c in old}
    files = {}
    for name, text in d.files.items():
        head, *body = _rows(text)
        files[name] = _text([[new[c] for c in head], *body])
    q = dict(d.question)
    for key in ("time_column", "period_column"):
        if key in q:
            q[key] = new[q[key]]
    q["metric"] = re.sub(r"[A-Za-z_]+", lambda m: new.get(m.group(), m.group()), q["metric"])
    return Case(files, q, {v: k for k, v in new.items()}, 1)


def _extra_column(d: Draw) -> Case:
    """One more column in the base table: a label drawn at random for every row."""
    rng = _rng(d, "extra")
    name = f"{d.base_table}.csv"
    head, *body = _rows(d.files[name])
    labels = rng.choice(EXTRA_VALUES, size=len(body))
    files = dict(d.files)
    files[name] = _text([[*head, EXTRA_COLUMN], *([*r, str(x)] for r, x in zip(body, labels))])
    return Case(files, dict(d.question), {}, 1)


def _scale(factor: float) -> Callable[[Draw], Case]:
    def scaled(d: Draw) -> Case:
        """The metric's numerator column in other units (cents to dollars, per thousand)."""
        column = SCALED[d.question["metric"]]
        name = f"{d.base_table}.csv"
        head, *body = _rows(d.files[name])
        i = head.index(column)
        for r in body:
            r[i] = repr(float(r[i]) * factor)
        files = dict(d.files)
        files[name] = _text([head, *body])
        return Case(files, dict(d.question), {}, 1)

    return scaled


VARIANTS: dict[str, Callable[[Draw], Case]] = {
    "same": _same,
    "swap": _swap,
    "rows": _shuffle_rows,
    "columns": _shuffle_columns,
    "rename": _rename,
    "extra": _extra_column,
    **{f"scale_{f:g}": _scale(f) for f in SCALES},
}


def applies(d: Draw, variant: str) -> bool:
    """Scaling needs a metric with a numerator column; counts have none."""
    return not variant.startswith("scale_") or d.question["metric"] in SCALED


def _original(column: str, names: dict[str, str]) -> str:
    table, dot, col = column.rpartition(".")
    col = names.get(col, col)
    return f"{table}.{col}" if dot else col


def _names_of(rc: Any, names: dict[str, str], d: Draw) -> frozenset[frozenset[tuple[str, str]]]:
    return frozenset(
        segment_key(
            {_original(k, names): value_text(v) for k, v in s.items()},
            d.base_table,
            d.base_columns,
        )
        for s in [rc.segment, *rc.aliases]
    )


def ask(d: Draw, variant: str, folder: Path) -> Answer:
    """Load ``variant`` of the draw into a DuckDB file under ``folder`` and explain its change."""
    from sql_tools import ToolContext
    from tasks.engine.explain import explain_change
    from tasks.engine.parse import build_question
    from tasks.ingest.load import load_files

    case = VARIANTS[variant](d)
    data = folder / "data"
    data.mkdir(parents=True)
    paths = []
    for name, text in case.files.items():
        (data / name).write_text(text, encoding="utf-8")
        paths.append(data / name)
    db = folder / "draw.duckdb"
    load_files(paths, db)
    with ToolContext(db) as ctx:
        ex = explain_change(ctx, build_question(ctx.schema, **case.question))
    return Answer(
        causes=frozenset(
            (_names_of(rc, case.names, d), case.sign * (1 if rc.contribution > 0 else -1))
            for rc in ex.root_causes
        ),
        global_shift=ex.global_shift is not None,
        significant=ex.change.significant,
    )


def missed(d: Draw, got: Answer) -> list[str]:
    """The planted causes none of the answer's causes names."""
    named = set().union(*(names for names, _ in got.causes)) if got.causes else set()
    return [
        "&".join(f"{k}={v}" for k, v in sorted(c["segment"].items()))
        for c in d.planted["root_causes"]
        if segment_key(c["segment"], d.base_table, d.base_columns) not in named
    ]


class Answers:
    """Answers cached by (family, seed, variant): every comparison with the original draw reads
    one load and one explanation of it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._draws: dict[tuple[str, int], Draw] = {}
        self._answers: dict[tuple[str, int, str], Answer] = {}

    def draw(self, family: str, seed: int) -> Draw:
        key = (family, seed)
        if key not in self._draws:
            self._draws[key] = draw(family, seed)
        return self._draws[key]

    def get(self, family: str, seed: int, variant: str) -> Answer:
        key = (family, seed, variant)
        if key not in self._answers:
            folder = self.root / f"{family}-{seed}-{variant}"
            self._answers[key] = ask(self.draw(family, seed), variant, folder)
        return self._answers[key]
