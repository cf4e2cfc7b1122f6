"""The offline planner: hypotheses from the engine, investigated through the same tools.

Without a model, hypotheses come from the engine's answer with templated stories: each root
cause; the whole parent of a root cause (did the wider segment move, or only this part?); the
strongest other driver; an even shift of everything; a data problem; and, when the change is
within the noise, whether it is real at all. Each is investigated with the same SQL tools, the
same ledger and the same gate as the Claude path: a ``metric_compare_periods`` split of the
segment against its siblings (a ratio's numerator and denominator each), a ``write_finding``
with the figures those splits returned, and a verdict from what the gate said.
"""

from __future__ import annotations

from typing import Any

from sql_tools.output import Figures, Quantity, gross_movement, share_text
from sql_tools.words import share_in
from tasks.agent.ledger import formats
from tasks.agent.models import Hypothesis
from tasks.agent.session import Session
from tasks.engine.clean_days import NOT_MOST
from tasks.engine.explain import compare_arguments
from tasks.engine.result import Explanation, Segment, segment_key
from tasks.engine.spec import Question

RULE_OUT_CRITIQUES = (
    "not significant",
    "effect too small",
    "too small",
    "too little data",
    "explained by the root causes",
)


def _seg(segment: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in segment.items()) or "everything"


TITLE_MAX = 200


def _title(text: str) -> str:
    """A hypothesis title within its limit (segments over many columns make long ones)."""
    return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1].rstrip() + "…"


def _with_history(h: dict[str, Any], history: dict[str, Any]) -> dict[str, Any] | None:
    """A hypothesis told what past investigations said of its segment; None when a past
    investigation of this data dismissed it and this run's engine gives no new evidence (not a
    root cause). A past investigation of other data is cited as such and does not raise the
    prior; one of this data is cited first."""
    seg = segment_key(h.get("segment") or {})
    if not seg:
        return h
    for d in history.get("dismissed", []):
        if segment_key(d.get("segment") or {}) == seg and h.get("kind") == "driver":
            return None
    similar = sorted(history.get("similar", []), key=lambda p: p.get("same_data") is False)
    for past in similar:
        if any(segment_key(_parse(c)) == seg for c in past.get("root_causes", [])):
            other = past.get("same_data") is False
            note = (
                f" Seen before{' on other data' if other else ''}: the investigation of "
                f"{past['date']} ({past['metric']}, {past['periods']}, run {past['run_id']}) "
                "named the same segment."
            )
            return {
                **h,
                "story": h["story"] + note,
                "prior": h["prior"] if other else min(0.95, h["prior"] + 0.1),
                "cites": [past["run_id"]],
            }
    return h


def _parse(text: str) -> dict[str, str]:
    """``a=1, b=x`` (the store's segment text) -> {a: 1, b: x}."""
    out = {}
    for part in text.split(", "):
        k, _, v = part.partition("=")
        out[k.strip()] = v.strip()
    return out


def offline_hypotheses(
    e: Explanation, limit: int = 6, history: dict[str, Any] | None = None
) -> list[tuple[Hypothesis, dict[str, Any]]]:
    """Hypotheses with templated stories, most likely first, each with its plan (what to
    check: ``kind`` cause, parent, global, data_quality or real). ``history`` (``similar``
    past investigations, ``dismissed`` past findings) is cited in the stories; a driver that
    was dismissed before is not proposed again unless the engine now names it a root cause."""
    metric = e.metric.name or e.metric.expression
    out: list[dict[str, Any]] = []
    if not e.change.significant:
        out.append(
            dict(
                title=f"The move in {metric} is real",
                story="The metric moved by more than day-to-day variation would explain.",
                expected="The change is outside the noise and some segment stands out.",
                category="global",
                prior=0.3,
                kind="real",
            )
        )
    for rc in e.root_causes:
        out.append(_cause(rc, metric, prior=0.8))
    for rc in e.root_causes:
        if len(rc.segment) > 1:
            parent = dict(list(rc.segment.items())[:-1])
            child_col = list(rc.segment)[-1]
            out.append(
                dict(
                    title=_title(f"All of {_seg(parent)} moved, not only {_seg(rc.segment)}"),
                    story=f"Something affected {_seg(parent)} as a whole, across every "
                    f"{child_col}.",
                    expected=f"Every {child_col} inside {_seg(parent)} moves alike.",
                    segment=parent,
                    dimensions=[child_col],
                    category="rate",
                    prior=0.3,
                    kind="parent",
                    child=rc.segment,
                )
            )
    named = [rc.segment for rc in e.root_causes]
    related = [d for d in e.drivers if d.segment not in named and not _overlaps(d.segment, named)]
    if related:
        out.append({**_cause(related[0], metric, prior=0.4), "kind": "driver"})
    if e.change.significant:
        out.append(
            dict(
                title=f"Everything moved: an even shift of {metric}",
                story="A change that hit every segment alike (seasonality, pricing, a "
                "site-wide issue) moved the metric.",
                expected="Every segment moves by about the same factor; no segment stands out.",
                category="global",
                prior=0.5 if e.global_shift is not None else 0.2,
                kind="global",
            )
        )
    data_problem = dict(
        title="A data problem, not the business",
        story="Missing days, a partly loaded period, duplicated rows or a spike of empty "
        "values moved the number, not customers.",
        expected="The data-quality checks find gaps, duplicates or null spikes in the periods, "
        "and the move goes away on the days the data fully covers.",
        category="data_quality",
        prior=0.8 if _data_moves(e) else 0.3 if e.data_quality else 0.1,
        kind="data_quality",
    )
    # the headline's order: a move the data explains is looked at first
    if _data_moves(e):
        out.insert(0, data_problem)
    else:
        out.append(data_problem)
    if history:
        out = [x for x in (_with_history(h, history) for h in out) if x is not None]
    hyps = []
    for i, h in enumerate(out[:limit], start=1):
        fields = {k: v for k, v in h.items() if k in Hypothesis.model_fields}
        fields.setdefault("dimensions", list(fields.get("segment", {})))
        fields.setdefault("source", "data_quality" if h.get("kind") == "data_quality" else "engine")
        hyps.append((Hypothesis(id=f"h{i}", **fields), h))
    return hyps


def _data_moves(e: Explanation) -> list[Segment]:
    """Root causes, and the even shift, that the engine puts down to the data."""
    moved = [*(e.root_causes if e.change.significant else []), e.global_shift]
    return [s for s in moved if s is not None and s.effect == "data_quality"]


def _data_first(e: Explanation, category: str) -> str | None:
    """For a business cause (any category but data_quality): the note of the data problem the
    change is put down to first (days missing from the whole table), or None."""
    g = e.global_shift
    if category == "data_quality" or g is None or g.effect != "data_quality":
        return None
    return g.data_quality.message if g.data_quality is not None else "days missing from the data"


def _overlaps(seg: dict[str, Any], named: list[dict[str, Any]]) -> bool:
    items = set(map(str, seg.items()))
    return any(
        items <= set(map(str, n.items())) or set(map(str, n.items())) <= items for n in named
    )


def _cause_title(s: Segment) -> str:
    words = {
        "rate": "changed",
        "mix": "changed its share",
        "new": "appeared",
        "gone": "disappeared",
        "data_quality": "has a data problem",
    }
    return _title(f"{_seg(s.segment)} {words.get(s.effect, 'changed')}")


def _cause(s: Segment, metric: str, prior: float) -> dict[str, Any]:
    stories = {
        "rate": f"Something changed for {_seg(s.segment)} alone (a release, a price, a channel), "
        f"and its {metric} moved far more than the rest.",
        "mix": f"The share of {_seg(s.segment)} in the population shifted, which moves "
        f"{metric} even if no segment's own rate changed.",
        "new": f"{_seg(s.segment)} is new in the comparison period and adds to {metric}.",
        "gone": f"{_seg(s.segment)} stopped appearing in the comparison period.",
        "data_quality": f"The data for {_seg(s.segment)} is incomplete or duplicated.",
    }
    return dict(
        title=_cause_title(s),
        story=stories.get(s.effect, stories["rate"]),
        expected=f"{_seg(s.segment)} moves beyond the noise and well beyond its siblings.",
        segment=s.segment,
        category=s.effect,
        prior=prior,
        kind="cause",
    )


def plan_hypothesis(session: Session, q: Question, e: Explanation, plan: dict[str, Any]) -> str:
    """Investigate one hypothesis through ``session`` as ``plan`` says; return the stop reason."""
    h = session.h
    kind = plan.get("kind", "cause")
    if kind == "real":
        _, payload, entry = session.call("metric_compare_periods", compare_arguments(q))
        unjudged = e.change.noise_unjudged
        verdict = "ruled_out" if not e.change.significant and not unjudged else "inconclusive"
        summary = (
            f"The change is within the noise (p = {e.change.p_value:.2g}; {e.change.method})."
            if not unjudged
            else f"Neither shown nor ruled out: {unjudged}."
        )
        session.call(
            "conclude",
            {
                "status": verdict,
                "confidence": "high" if (e.change.p_value or 0) > 0.2 and not unjudged else "low",
                "summary": summary[0].upper() + summary[1:],
                "evidence": [entry.id],
            },
        )
        return "concluded"
    if kind == "data_quality":
        return _plan_quality(session, q, e)
    if kind == "global":
        return _plan_global(session, q, e)
    if kind == "parent":
        return _plan_parent(session, q, e, plan["child"])
    return _plan_cause(session, q, e, h.segment, h.category)


def _split(
    session: Session, q: Question, segment: dict[str, Any], metric: dict[str, Any] | None = None
) -> tuple[str, dict | None, dict]:
    """Compare ``segment`` with its siblings: filter on all but its last column and group by
    that one (the question's metric, or ``metric``). Returns (evidence id, the segment's row or
    None, the payload)."""
    cols = list(segment)
    parent = {k: segment[k] for k in cols[:-1]}
    args = compare_arguments(q, parent)
    args["group_by"] = cols[-1:]
    args["limit"] = 1000
    if metric is not None:
        args["metric"] = metric
    is_error, payload, entry = session.call("metric_compare_periods", args)
    row = None
    if not is_error:
        key = (payload.get("group_by") or cols)[-1]  # table.column beside a field of its name
        for r in payload.get("rows", []):
            if str(r.get(key)) == str(segment[cols[-1]]):
                row = r
    return entry.id, row, payload


def _parts(q: Question) -> list[dict[str, Any]] | None:
    """The measures ``metric_compare_periods`` gives a segment's metric from: the metric itself
    (a sum, count, average or distinct count), or a ratio's numerator and denominator (sums or
    counts), divided. None for a daily grain or a ratio of distinct counts (only the engine
    computes those)."""
    m = q.metric
    if m.grain is not None:
        return None
    aggs = [m.numerator, *([m.denominator] if m.denominator is not None else [])]
    if len(aggs) > 1 and any(a.fn not in ("sum", "count") for a in aggs):
        return None
    return [{"agg": a.fn, **({"column": a.column} if a.column else {})} for a in aggs]


def _measured(
    session: Session, q: Question, segment: dict[str, Any], metric: dict[str, Any]
) -> tuple[str, dict[str, Any] | None]:
    """Evidence id and ``metric``'s value per period for ``segment``: its row in a split, or
    the totals for the whole population (None when the call does not show them)."""
    if segment:
        eid, row, _ = _split(session, q, segment, metric)
        return eid, row
    args = {**compare_arguments(q), "metric": metric}
    is_error, payload, entry = session.call("metric_compare_periods", args)
    return entry.id, None if is_error else payload["total"]


def _divided(values: list[Any]) -> Any:
    """A part's value, or the first over the second (None where undefined)."""
    if len(values) == 1:
        return values[0]
    n, d = values
    return n / d if n is not None and d else None


def _claim(session: Session, q: Question, segment: dict[str, Any]) -> tuple[list[str], dict]:
    """Evidence ids and the segment's metric per period as the tools show it: from
    ``metric_compare_periods`` (which the stored cells answer without reading the source), or
    from the engine run on the segment when only the engine computes the metric."""
    ids: list[str] = []
    numbers: dict[str, float | None] = {}
    parts = _parts(q)
    shown = []
    for metric in parts or []:
        eid, values = _measured(session, q, segment, metric)
        ids.append(eid)
        shown.append(values)
    if parts and all(v is not None for v in shown):
        numbers = {
            w: _divided([v[w] for v in shown])  # type: ignore[index]
            for w in ("baseline", "comparison")
        }
    if not numbers:
        args = compare_arguments(q, segment)
        args.pop("metric")
        args["metric"] = q.metric.expression
        args["table"] = q.metric.table
        if q.metric.grain:
            args["grain"] = q.metric.grain
        args["max_depth"] = 1
        is_error, payload, entry = session.call("metric_explain_change", args)
        ids.append(entry.id)
        if not is_error:
            numbers = {
                "baseline": payload["baseline"]["value"],
                "comparison": payload["comparison"]["value"],
            }
    return ids, numbers


def _figures(session: Session, e: Explanation) -> Figures:
    """How this investigation prints its metric: the ledger's (the report's formats)."""
    return session.ledger.figures or Figures.of(e.model_dump(mode="json"))


def _finding_verdict(
    session: Session,
    ids: list[str],
    result: dict,
    what: str,
    figures: Figures,
    behind: str | None = None,
) -> None:
    """Conclude from the gate's answer on a finding. ``behind``: what the data problem that
    comes first says, for a business cause (confirmed at most with medium confidence then:
    its share is of a change the data moved)."""
    what = what.rstrip(".")
    status = result.get("status")
    critique = result.get("critique") or ""
    if status == "accepted":
        share = result.get("share_of_change")
        strong = share is not None and abs(share) >= 0.3 and behind is None
        part = share * figures.net if share is not None and figures.net is not None else None
        first = f" The data problem comes first: {behind}" if behind else ""
        session.call(
            "conclude",
            {
                "status": "confirmed",
                "confidence": "high" if strong else "medium",
                "summary": f"{what}: the gate accepted the finding"
                + (f" ({share_in(part, figures)})." if part is not None else ".")
                + first,
                "evidence": ids,
            },
        )
    elif any(c in critique for c in RULE_OUT_CRITIQUES) or critique.startswith("no "):
        session.call(
            "conclude",
            {
                "status": "ruled_out",
                "confidence": "medium",
                "summary": f"{what}: {critique}",
                "evidence": ids,
            },
        )
    else:
        session.call(
            "conclude",
            {
                "status": "inconclusive",
                "confidence": "low",
                "summary": f"{what}: {critique or 'no finding could be recorded'}",
                "evidence": ids,
            },
        )


def _write(session: Session, segment: dict, category: str, ids: list[str], numbers: dict) -> dict:
    h = session.h
    is_error, payload, _ = session.call(
        "write_finding",
        {
            "segment": segment,
            "category": category,
            "title": h.title,
            "summary": h.story,
            "evidence": ids,
            "baseline_value": numbers.get("baseline"),
            "comparison_value": numbers.get("comparison"),
        },
    )
    if is_error:
        return {"status": "dismissed", "critique": payload["error"]["message"]}
    return payload


def _plan_cause(session: Session, q: Question, e: Explanation, seg: dict, category: str) -> str:
    ids, numbers = _claim(session, q, seg)
    if not numbers:
        session.call(
            "conclude",
            {
                "status": "inconclusive",
                "confidence": "low",
                "summary": "the segment's figures could not be measured",
                "evidence": ids,
            },
        )
        return "concluded"
    result = _write(session, seg, category, ids, numbers)
    behind = _data_first(e, category)
    _finding_verdict(session, ids, result, _seg(seg), _figures(session, e), behind)
    return "concluded"


def _plan_parent(session: Session, q: Question, e: Explanation, child: dict[str, Any]) -> str:
    """Did the whole parent move, or only the child? Compare the child with its siblings."""
    eid, row, payload = _split(session, q, child)
    total = (payload.get("total") or {}).get("delta")
    child_delta = (row or {}).get("delta")
    if total is None or child_delta is None or not total:
        session.call(
            "conclude",
            {
                "status": "inconclusive",
                "confidence": "low",
                "summary": "the split by the child column could not be measured",
                "evidence": [eid],
            },
        )
        return "concluded"
    rest = total - child_delta
    share = child_delta / total
    same_way = rest * total > 0 and abs(rest) >= 0.5 * abs(child_delta)
    status = "inconclusive" if same_way else "ruled_out"
    entry = session.ledger.get(eid)
    args = entry.arguments if entry is not None else None
    _, changes = formats(payload, args, session.ledger.figures, q.metric.expression)
    summary = _parent_summary(_seg(session.h.segment), child, (child_delta, total), changes)
    summary += (
        "; the other parts moved the same way." if same_way else "; the others did not move alike."
    )
    if q.metric.kind == "ratio":
        numerator = q.metric.expression.split("/", 1)[0].strip()
        summary += f" (Figures of {numerator}, the ratio's numerator, not of the ratio.)"
    elif q.metric.grain:
        summary += (
            f" (Figures of {q.metric.expression} over each whole period, not its average per "
            f"{q.metric.grain}.)"
        )
    session.call(
        "conclude",
        {
            "status": status,
            "confidence": "high" if not same_way and abs(share) >= 0.8 else "medium",
            "summary": summary,
            "evidence": [eid],
        },
    )
    return "concluded"


def _parent_summary(
    parent: str, child: dict[str, Any], moved: tuple[float, float], changes: Quantity
) -> str:
    """How much of the parent's change (``moved``: the child's and the parent's) the child
    carries, in the split's format; when the child and the rest pull in opposite directions,
    in units and as a share of the gross movement."""
    child_delta, total = moved
    rest = total - child_delta
    gross = gross_movement(total, [child_delta, rest])
    carries = share_text(child_delta, total, gross, changes, f"{parent}'s change")
    if gross:
        return f"{_seg(child)} moved by {carries}; the rest of {parent}: {changes.change(rest)}"
    return (
        f"{_seg(child)} carries {carries} ({changes.change(child_delta)} of "
        f"{changes.change(total)}); the rest moved by {changes.change(rest)}"
    )


def _plan_global(session: Session, q: Question, e: Explanation) -> str:
    ids, numbers = _claim(session, q, {})
    if e.global_shift is not None:
        result = _write(session, {}, "global", ids, numbers)
        what = "an even shift of everything"
        _finding_verdict(session, ids, result, what, _figures(session, e), _data_first(e, "global"))
        return "concluded"
    session.call(
        "conclude",
        {
            "status": "ruled_out" if e.root_causes else "inconclusive",
            "confidence": "medium",
            "summary": "The move is concentrated in segments, not spread evenly"
            + _accounted(e, _figures(session, e)),
            "evidence": ids,
        },
    )
    return "concluded"


def _accounted(e: Explanation, figures: Figures) -> str:
    """What the root causes add up to, said as the report says it."""
    share = e.explained_share
    if figures.gross:
        net = figures.changes.change(figures.net)
        moved = figures.changes.value(figures.gross)
        return f": the root causes pull in opposite directions ({moved} moved for a net {net})."
    if share is None:
        return "."
    total = sum(c.contribution for c in e.root_causes)
    return f": the root causes account for {share_in(total, figures)}."


def _not_the_data(e: Explanation) -> str:
    """Why the data-quality issues found do not explain the move."""
    kinds = ", ".join(sorted({d.kind.replace("_", " ") for d in e.data_quality}))
    moved = [*e.root_causes, e.global_shift]
    notes = [s.data_quality.message for s in moved if s is not None and s.data_quality]
    if e.change.noise_unjudged:
        return f"The checks found {kinds}; whether the change is more than noise cannot be judged."
    if not e.change.significant:
        return f"The checks found {kinds}, but the change is within the noise."
    notes += [n for n in e.notes if NOT_MOST in n]  # days missing from the whole table
    if notes:
        return f"The checks found {kinds}, but they do not explain the move: " + " ".join(notes)
    return (
        f"The checks found {kinds}, but none of them leaves days out of the segments that moved, "
        "so none explains the move."
    )


def _plan_quality(session: Session, q: Question, e: Explanation) -> str:
    """Rows per day (of the segment the data explains, if any), then a data_quality finding
    for that segment; ruled out when no move is put down to the data."""
    moves = _data_moves(e)
    seg = dict(moves[0].segment) if moves else {}
    args = compare_arguments(q, seg)
    if q.periods.by_dates:
        args["group_by"] = [q.periods.time_column]
        args["limit"] = 1000
        args["metric"] = {"agg": "count"}
    _, _, entry = session.call("metric_compare_periods", args)
    ids = [entry.id]
    if not moves:
        if e.data_quality:
            summary = _not_the_data(e)
        else:
            summary = (
                "The checks found no missing days, partial periods, duplicated rows, null spikes or "
                "non-finite values."
            )
        session.call(
            "conclude",
            {"status": "ruled_out", "confidence": "medium", "summary": summary, "evidence": ids},
        )
        return "concluded"
    claim_ids, numbers = _claim(session, q, seg)
    result = _write(session, seg, "data_quality", ids + claim_ids, numbers)
    note = moves[0].data_quality
    what = note.message if note is not None else "the move matches the data-quality problems"
    _finding_verdict(session, ids + claim_ids, result, what, _figures(session, e))
    return "concluded"
