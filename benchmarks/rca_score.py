"""Scoring of root-cause localization: element-level exact match, micro-F1.

The rule used by the Squeeze / RiskLoc / RobustSpot papers and their evaluation scripts:

* A root-cause *element* is one conjunction of dimension=value pairs, e.g.
  ``{"platform": "ios", "app_version": "5.2"}``. A case's label is a set of elements.
* A predicted element is a true positive only if its pairs equal those of one labelled element
  (order irrelevant). An ancestor or descendant counts as one false positive and one false
  negative: no partial credit.
* Per case, on de-duplicated sets: TP = |pred & true|, FP = |pred - true|, FN = |true - pred|.
* Micro aggregation: TP, FP, FN are summed over the cases of a group (a dataset, or a setting
  such as "B0 / layer 2 / 3 elements") and F1 = 2TP / (2TP + FP + FN) is computed once.

Values are compared as text, so ``2000`` and ``"2000"`` are the same value (the loader types a
numeric-looking dimension such as a bitrate as an integer); a float with an integral value
(``2000.0``) is written as the integer first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Element = frozenset[tuple[str, str]]

__all__ = [
    "Counts",
    "Element",
    "canonical",
    "canonical_set",
    "case_counts",
    "f1_score",
    "grouped_scores",
    "micro_scores",
    "value_text",
]


def value_text(value: Any) -> str:
    """The text a dimension value is compared by: ``str(value)``, ``2000.0`` as ``2000``."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


def canonical(element: Mapping[str, Any] | str | Iterable[tuple[Any, Any]]) -> Element:
    """One element as a frozenset of ``(dimension, value text)`` pairs.

    Accepts a mapping ``{"a": "a1", "b": 2}``, the papers' label text ``"a=a1&b=2"``, or an
    iterable of ``(dimension, value)`` pairs.
    """
    if isinstance(element, str):
        pairs: list[tuple[Any, Any]] = []
        for part in element.split("&"):
            if part.strip():
                key, _, value = part.partition("=")
                pairs.append((key.strip(), value.strip()))
    elif isinstance(element, Mapping):
        pairs = list(element.items())
    else:
        pairs = list(element)
    return frozenset((str(k), value_text(v)) for k, v in pairs)


def canonical_set(elements: Iterable[Any] | str | None) -> set[Element]:
    """A whole root-cause set, de-duplicated. Text is split on ``;`` (``"a=a1;b=b2&c=c3"``)."""
    if elements is None:
        return set()
    if isinstance(elements, str):
        elements = [e for e in elements.split(";") if e.strip()]
    return {canonical(e) for e in elements}


@dataclass(frozen=True)
class Counts:
    """TP / FP / FN of one case or summed over many."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        return f1_score(self.tp, self.fp, self.fn)

    @property
    def exact(self) -> bool:
        """The predicted set equals the labelled set."""
        return self.fp == 0 and self.fn == 0


def f1_score(tp: int, fp: int, fn: int) -> float:
    """``2TP / (2TP + FP + FN)``; 1.0 when there was nothing to find and nothing predicted."""
    denom = 2 * tp + fp + fn
    return 2 * tp / denom if denom else 1.0


def case_counts(pred: Iterable[Any] | str | None, true: Iterable[Any] | str | None) -> Counts:
    """TP / FP / FN of one case under element-level exact matching."""
    p, t = canonical_set(pred), canonical_set(true)
    tp = len(p & t)
    return Counts(tp, len(p) - tp, len(t) - tp)


def micro_scores(cases: Iterable[tuple[Any, Any]]) -> dict[str, Any]:
    """Micro precision / recall / F1 over ``(pred, true)`` pairs (the published number).

    Also returns two diagnostics that are *not* the published metric: the mean of per-case F1
    and the share of cases whose predicted set is exactly the labelled set.
    """
    total = Counts()
    n = exact = 0
    case_f1 = 0.0
    for pred, true in cases:
        c = case_counts(pred, true)
        total += c
        n += 1
        exact += c.exact
        case_f1 += c.f1
    return {
        "n_cases": n,
        "tp": total.tp,
        "fp": total.fp,
        "fn": total.fn,
        "precision": total.precision,
        "recall": total.recall,
        "f1": total.f1,
        "mean_case_f1": case_f1 / n if n else 0.0,
        "exact_set_accuracy": exact / n if n else 0.0,
    }


def grouped_scores(cases: Iterable[tuple[str, Any, Any]]) -> dict[str, dict[str, Any]]:
    """Micro scores per group, for ``(group, pred, true)`` triples, plus ``"all"`` over every case.

    A group named ``"all"`` would be overwritten; name groups by dataset or setting.
    """
    groups: dict[str, list[tuple[Any, Any]]] = {}
    for group, pred, true in cases:
        groups.setdefault(group, []).append((pred, true))
    out = {g: micro_scores(pairs) for g, pairs in sorted(groups.items())}
    out["all"] = micro_scores(pair for pairs in groups.values() for pair in pairs)
    return out
