"""Measure and decompose: the engine's answer for a question on a loaded database.

Steps after this one need the engine's segment statistics (the gate judges claims with them)
and a tool context on the database. Both are kept per process, keyed by the database, the
question and the data's content hash, so hypotheses investigated at once share one analysis
and one read-only connection instead of recomputing them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from sql_tools._context import ToolContext
from tasks._prefect import lazy_task
from tasks.engine import Analysis, analyze
from tasks.engine.spec import Question

_LOCK = threading.Lock()
_CONTEXTS: dict[str, ToolContext] = {}
_ANALYSES: dict[tuple[str, str, str], tuple[Question, Analysis]] = {}


def data_hash(db: str | Path) -> str:
    """SHA-256 over the loaded tables' file hashes: the data's identity for caching."""
    with ToolContext(db) as ctx:
        return fingerprint_hash(fingerprint(ctx))


def fingerprint(ctx: ToolContext) -> dict[str, str]:
    """table -> SHA-256 of the file it was loaded from."""
    return {name: rec.sha256 for name, rec in sorted(ctx.schema.catalog.loads.items())}


def fingerprint_hash(fp: dict[str, str]) -> str:
    """One hash for a whole fingerprint."""
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()


def question_of(ctx: ToolContext, qargs: dict[str, Any]) -> Question:
    """The validated question from command-line style arguments (see ``build_question``)."""
    from tasks.engine.parse import build_question

    args = dict(qargs)
    if args.get("metrics_file"):
        args["metrics_file"] = Path(args["metrics_file"])
    args["filters"] = args.get("filters") or []
    return build_question(ctx.schema, **args)


def shared_context(db: str | Path) -> ToolContext:
    """The process's read-only context on ``db`` (opened on first use, closed by ``release``)."""
    path = str(Path(db).resolve())
    with _LOCK:
        ctx = _CONTEXTS.get(path)
        if ctx is None:
            ctx = _CONTEXTS[path] = ToolContext(path)
        return ctx


def open_question(db: str | Path, qargs: dict[str, Any]) -> tuple[ToolContext, Question]:
    """The shared context and the validated question, for steps that need no analysis."""
    ctx = shared_context(db)
    return ctx, question_of(ctx, qargs)


def open_analysis(
    db: str | Path, qargs: dict[str, Any], data: str
) -> tuple[ToolContext, Question, Analysis]:
    """The shared context, the question and the engine's analysis (computed once per process)."""
    path = str(Path(db).resolve())
    key = (path, json.dumps(qargs, sort_keys=True, default=str), data)
    ctx = shared_context(path)
    with _LOCK:
        if key not in _ANALYSES:
            q = question_of(ctx, qargs)
            _ANALYSES[key] = (q, analyze(ctx, q))
        q, analysis = _ANALYSES[key]
    return ctx, q, analysis


def release(db: str | Path) -> None:
    """Close the shared context of ``db`` and forget its analyses."""
    path = str(Path(db).resolve())
    with _LOCK:
        ctx = _CONTEXTS.pop(path, None)
        for key in [k for k in _ANALYSES if k[0] == path]:
            del _ANALYSES[key]
    if ctx is not None:
        ctx.close()


def decompose(db: str, qargs: dict[str, Any], data: str) -> dict[str, Any]:
    """The engine's explanation (result.json's shape) for ``qargs`` on ``db``."""
    _, _, analysis = open_analysis(db, qargs, data)
    return analysis.explanation.model_dump(mode="json")


__getattr__ = lazy_task("decompose_task", decompose, cache=True)
