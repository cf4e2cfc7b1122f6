"""The report people read: ``report.html`` with charts, next to ``report.md``.

``write_report_files(result, out, db)`` draws ``charts/waterfall.png`` (and
``charts/timeseries.png`` when the periods are date ranges) and writes a standalone
``report.html`` built from the ``result.json`` dict: inline CSS, charts inline as ``data:`` PNGs,
no scripts, no external fetches, and a Content-Security-Policy that forbids both.

Every piece of text from the data or from a model (segment values, column names, titles,
summaries, critiques, SQL) is HTML-escaped, with characters that draw nothing or steer the
terminal or the text direction shown as escapes (``Wid\\u200bget``); addresses in prose are
defanged (``hxxps:``) so no viewer turns them into links; the only images are our own charts.
"""

from __future__ import annotations

import base64
import html
import math
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sql_tools._context import ToolContext
from sql_tools._errors import SqlToolError
from sql_tools.output import dumps, printable, printable_line
from tasks.report.charts import (
    TIMESERIES,
    WATERFALL,
    DailySeries,
    daily_series,
    timeseries_png,
    waterfall_png,
)
from tasks.report.command import drilldown_command
from tasks.report.markdown import (
    OTHER_DATA_NOTE,
    RELATION,
    Columns,
    data_first,
    decimals,
    defang,
    fmt,
    other_movers,
    reported_name,
    short_aliases,
)

__all__ = ["DailySeries", "charts_markdown", "daily_series", "render_html", "write_report_files"]

CHARTS: dict[str, str] = {
    WATERFALL: "Contribution waterfall",
    TIMESERIES: "The metric per day, before and after",
}
"""Our chart files (fixed names) and their alt text, in report order."""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def write_report_files(
    result: dict[str, Any], out: Path, db: Path | str, ctx: ToolContext | None = None
) -> list[Path]:
    """Write ``out/charts/*.png`` and ``out/report.html``; return the paths written (the per-day
    numbers are read on ``ctx`` when given, else on a read-only context of its own).

    Pieces that cannot be drawn are left out: no waterfall without both period values, no
    per-day chart for period-label questions or when the database cannot be read.
    """
    charts_dir = out / "charts"
    charts_dir.mkdir(parents=True, exist_ok=True)
    images: dict[str, bytes] = {}
    notes: list[str] = []
    png = waterfall_png(result)
    if png is not None:
        images[WATERFALL] = png
    try:
        series = daily_series(result, db, ctx=ctx)
    except SqlToolError as exc:
        series = []
        notes.append(f"No per-day chart: the data could not be read ({exc.message}).")
    png = timeseries_png(series, result)
    if png is not None:
        images[TIMESERIES] = png
    written: list[Path] = []
    for name in CHARTS:  # a chart not drawn now is not left from an earlier investigation
        if name not in images:
            (charts_dir / name).unlink(missing_ok=True)
    for name, data in images.items():
        path = charts_dir / name
        path.write_bytes(data)
        written.append(path)
    page = out / "report.html"
    page.write_text(render_html(result, images, db=str(db), chart_notes=notes), encoding="utf-8")
    written.append(page)
    return written


def charts_markdown(paths: Iterable[Path | str]) -> str:
    """A ``## Charts`` section for report.md linking our chart files (relative links).

    Only our own fixed file names are linked; anything else in ``paths`` is ignored.
    """
    names = {Path(p).name for p in paths if Path(p).parent.name == "charts"}
    lines = [f"![{alt}](charts/{name})" for name, alt in CHARTS.items() if name in names]
    if not lines:
        return ""
    return "\n\n".join(["## Charts", *lines]) + "\n"


# --- text --------------------------------------------------------------------------------------


def h(value: Any, limit: int = 120) -> str:
    """Data or model text as inert HTML: one line, capped, hidden characters shown as escapes,
    addresses defanged, HTML-escaped."""
    return html.escape(defang(printable_line(value, limit)), quote=True)


def code(value: Any) -> str:
    """Text for a ``<pre>`` block (SQL, parameters, commands): exact lines, hidden characters
    shown as escapes, HTML-escaped."""
    return html.escape(printable(value, keep="\n"), quote=False)


def _num(x: Any, kind: str = "number", places: int | None = None) -> str:
    return html.escape(fmt(x if isinstance(x, int | float) else None, kind, places))


def _p(x: Any) -> str:
    return "n/a" if not isinstance(x, int | float) else f"{x:.2g}"


def _share(x: Any) -> str:
    return "n/a" if not isinstance(x, int | float) else f"{x * 100:.1f}%"


def segment_html(seg: dict[str, Any] | None, aliases: Sequence[dict[str, Any]] = ()) -> str:
    """``platform = ios, app_version = 5.2`` escaped; ``everything`` for the population; other
    names of as many columns as ``also: ...``."""
    if not seg:
        return "everything"
    text = ", ".join(f"<b>{h(k)}</b> = {h(v)}" for k, v in seg.items())
    also = short_aliases(seg, aliases)
    if also:
        text += ' <span class="muted">(also: '
        text += "; ".join(segment_html(a) for a in also) + ")</span>"
    return text


# --- page ----------------------------------------------------------------------------------------

_CSS = """
body{font:15px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#222;
 max-width:980px;margin:2em auto;padding:0 1em;background:#fff}
h1{font-size:1.7em;margin-bottom:.3em}h2{margin-top:1.8em;border-bottom:1px solid #e3e6eb;
 padding-bottom:.2em}h3{font-size:1.05em;margin:1.2em 0 .3em}
.headline{font-size:1.15em}.sig{padding:.6em .9em;border-radius:6px;background:#f3f4f7}
.sig.yes{border-left:4px solid #c0392b}.sig.no{border-left:4px solid #8a94a6}
table{border-collapse:collapse;width:100%;margin:.6em 0;font-size:.92em}
th,td{border-bottom:1px solid #e3e6eb;padding:.35em .5em;text-align:left;vertical-align:top}
th{background:#f7f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.down{color:#c0392b}.up{color:#1e8449}
.badge{display:inline-block;padding:.05em .55em;border-radius:10px;font-size:.8em;
 font-weight:600;color:#fff;vertical-align:middle}
.confirmed{background:#1e8449}.ruled_out{background:#8a94a6}.inconclusive{background:#b7791f}
.dq{border-left:4px solid #b7791f;background:#fdf6e7;padding:.5em .9em;border-radius:4px}
.dq.error{border-left-color:#c0392b;background:#fbeceb}
.datafirst{border-left:4px solid #b7791f;background:#fdf6e7;padding:.6em .9em;border-radius:6px}
pre{background:#f7f8fa;border:1px solid #e3e6eb;border-radius:4px;padding:.6em;
 white-space:pre-wrap;word-break:break-word;font-size:.82em}
details{margin:.4em 0 1em}summary{cursor:pointer;color:#4a5a78}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #e3e6eb}
figcaption{font-size:.85em;color:#666}.muted{color:#666;font-size:.9em}
"""

_STATUS = {"confirmed": "Confirmed", "ruled_out": "Ruled out", "inconclusive": "Inconclusive"}


def render_html(
    result: dict[str, Any],
    images: dict[str, bytes] | None = None,
    *,
    db: str | None = None,
    chart_notes: Sequence[str] = (),
) -> str:
    """The whole report as one standalone HTML page (same content as report.md, plus charts)."""
    m = result.get("metric") or {}
    name = h(m.get("name") or m.get("expression"))
    body = [
        f"<h1>Why did {name} move?</h1>",
        *_headline(result, name),
        *_data_quality(result),
        *_root_causes(result),
        *_charts(images or {}, chart_notes),
        *_segments(result),
        *_hypotheses(result),
        *_findings(result),
        *_similar(result),
        *_check(result, db),
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="referrer" content="no-referrer">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>Why did {name} move?</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def _headline(result: dict[str, Any], name: str) -> list[str]:
    m, b, c = result.get("metric") or {}, result.get("baseline") or {}, result.get("change") or {}
    cmp = result.get("comparison") or {}
    direction = _direction(c.get("absolute"))
    lines = [
        f'<p class="headline"><b>{name}</b> on <code>{h(m.get("table"))}</code> went from '
        f"<b>{_num(b.get('value'))}</b> ({h(b.get('label'))}) to <b>{_num(cmp.get('value'))}</b> "
        f'({h(cmp.get("label"))}): <b class="{direction}">{_num(c.get("absolute"))} '
        f"({_num(c.get('relative'), 'percent')})</b>.</p>"
    ]
    first = data_first(result)
    if first:
        lines.append(f'<p class="datafirst"><b>{h(first[0], 400)}</b></p>')
        if first[1:]:
            lines += ["<ul>", *[f"<li>{h(n, 600)}</li>" for n in first[1:]], "</ul>"]
    method = h(c.get("method"), 400)
    if c.get("significant"):
        lines.append(
            f'<p class="sig yes">This change is <b>significant</b> (p = {_p(c.get("p_value"))}; '
            f"{method}).</p>"
        )
    else:
        lines.append(
            '<p class="sig no">This change is <b>not significant</b>: it is within the normal '
            f"noise (p = {_p(c.get('p_value'))}; {method}). No root cause is named.</p>"
        )
    return lines


def _direction(x: Any) -> str:
    if not isinstance(x, int | float) or x == 0 or not math.isfinite(x):
        return ""
    return "down" if x < 0 else "up"


def _data_quality(result: dict[str, Any]) -> list[str]:
    issues = result.get("data_quality") or []
    if not issues:
        return []
    lines = ["<h2>Data quality first</h2>"]
    for d in issues:
        kind = h(str(d.get("kind", "")).replace("_", " "))
        sev = str(d.get("severity", "warning"))
        cls = "dq error" if sev == "error" else "dq"
        lines.append(f'<p class="{cls}"><b>{kind}</b> ({h(sev)}): {h(d.get("message"), 400)}</p>')
    return lines


_SEG_HEAD = (
    "<tr><th>segment</th><th>before</th><th>after</th><th>contribution</th>"
    "<th>share of change</th><th>effect</th><th>p</th></tr>"
)


def _segment_table(
    rows: Sequence[dict[str, Any]], ratio: bool, notes: Sequence[str] = ()
) -> list[str]:
    out = ["<table>", _SEG_HEAD]
    cols = Columns.of(rows)
    v, c = cols.values, cols.contribution
    notes = [*notes, *[""] * (len(rows) - len(notes))]
    for s, note in zip(rows, notes, strict=True):
        effect = h(s.get("effect"))
        if (
            ratio
            and isinstance(s.get("rate"), int | float)
            and isinstance(s.get("mix"), int | float)
        ):
            effect += f" (rate {_num(s['rate'], places=c)}, mix {_num(s['mix'], places=c)})"
        out.append(
            f"<tr><td>{segment_html(s.get('segment'), s.get('aliases') or [])}{note}</td>"
            f'<td class="n">{_num(s.get("baseline"), places=v)}</td>'
            f'<td class="n">{_num(s.get("comparison"), places=v)}</td>'
            f'<td class="n {_direction(s.get("contribution"))}">'
            f"{_num(s.get('contribution'), places=c)}</td>"
            f'<td class="n">{_share(s.get("share"))}</td><td>{effect}</td>'
            f'<td class="n">{_p(s.get("p_value"))}</td></tr>'
        )
    return [*out, "</table>"]


def _others_table(
    rows: Sequence[dict[str, Any]], causes: Sequence[dict[str, Any]], ratio: bool, limit: int
) -> list[str]:
    """Drivers or offsetting segments beside the root causes (``other_movers``)."""
    shown = other_movers(rows, causes)[:limit]
    if not shown:
        return []
    notes = [
        f' <span class="muted">({RELATION[rel]} {segment_html(seg)})</span>'
        if rel and seg
        else f' <span class="muted">({RELATION[rel]})</span>'
        if rel
        else ""
        for _, rel, seg in shown
    ]
    return _segment_table([dict(row) for row, _, _ in shown], ratio, notes)


def _ratio(result: dict[str, Any]) -> bool:
    return (result.get("metric") or {}).get("kind") == "ratio"


def _root_causes(result: dict[str, Any]) -> list[str]:
    c = result.get("change") or {}
    if not c.get("significant"):
        return []
    lines = ["<h2>Root causes</h2>"]
    causes = result.get("root_causes") or []
    if causes:
        share = result.get("explained_share")
        together = (
            f" Together they account for {_num(share, 'percent').lstrip('+')} of the change."
            if isinstance(share, int | float)
            else ""
        )
        lines.append(
            "<p>The smallest set of segments that explains the change, most specific level "
            f"first.{together}</p>"
        )
        lines += _segment_table(causes, _ratio(result))
        # notes of moves not put down to the data (those are in the headline)
        notes = [
            rc["data_quality"].get("message")
            for rc in causes
            if isinstance(rc.get("data_quality"), dict) and rc.get("effect") != "data_quality"
        ]
        if any(notes):
            lines += ["<ul>", *[f"<li>{h(n, 600)}</li>" for n in notes if n], "</ul>"]
    else:
        lines.append("<p>No single segment stands out: the change is spread across the data.</p>")
    g = result.get("global_shift")
    if g:
        note = g.get("data_quality") if isinstance(g.get("data_quality"), dict) else {}
        why = "every segment moved by about the same factor"
        if note.get("message"):
            why = h(str(note["message"]).rstrip("."), 600)
        elif g.get("effect") == "data_quality":
            why = "it matches the data-quality problems above"
        lines += [
            "<h2>Everything moved</h2>",
            f"<p>An even shift across all the data accounts for {_num(g.get('contribution'))} "
            f"({_num(g.get('share'), 'percent')} of the change): {why}.</p>",
        ]
    return lines


def _charts(images: dict[str, bytes], notes: Sequence[str]) -> list[str]:
    if not images and not notes:
        return []
    lines = ["<h2>Charts</h2>"]
    for name, alt in CHARTS.items():
        data = images.get(name)
        if data is None or not data.startswith(b"\x89PNG\r\n\x1a\n"):
            continue
        b64 = base64.b64encode(data).decode("ascii")
        lines.append(
            f'<figure><img src="data:image/png;base64,{b64}" alt="{html.escape(alt)}">'
            f"<figcaption>{html.escape(alt)}</figcaption></figure>"
        )
    lines += [f'<p class="muted">{h(n, 400)}</p>' for n in notes]
    return lines


def _segments(result: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    ratio = _ratio(result)
    causes = result.get("root_causes") or []
    table = _others_table(result.get("offsetting") or [], causes, ratio, 5)
    if table:
        lines += ["<h2>Moving the other way</h2>", *table]
    table = _others_table(result.get("drivers") or [], causes, ratio, 10)
    if table:
        lines += ["<h2>Other segments that moved</h2>", *table]
    return lines


def _hypotheses(result: dict[str, Any]) -> list[str]:
    hyps = result.get("hypotheses") or []
    if not hyps:
        return []
    agent = (result.get("stats") or {}).get("agent") or {}
    how = "the offline planner" if agent.get("mode") == "offline" else h(agent.get("model"))
    lines = ["<h2>Hypotheses</h2>", f"<p>Investigated by {how} through the SQL tools.</p>"]
    for hyp in hyps:
        status = str(hyp.get("status", ""))
        status = status if status in _STATUS else "inconclusive"
        lines.append(
            f'<section class="hypothesis"><h3><span class="badge {status}">{_STATUS[status]}</span> '
            f'{h(hyp.get("title"), 200)} <span class="muted">({h(hyp.get("confidence"))} '
            "confidence)</span></h3>"
        )
        lines.append(f"<p>{h(hyp.get('summary'), 1000)}</p>")
        if hyp.get("cites"):
            runs = ", ".join(f"<code>{h(r)}</code>" for r in hyp["cites"])
            lines.append(f"<p>Seen before: past investigation {runs} named the same segment.</p>")
        evidence = hyp.get("evidence") or []
        if evidence:
            lines.append("<ul>")
            for ev in evidence:
                summary = (ev.get("result") or {}).get("summary")
                lines.append(
                    f"<li><code>{h(ev.get('id'))}</code> {h(ev.get('tool'))}: {h(summary, 200)}</li>"
                )
            lines.append("</ul>")
            queries = [ev for ev in evidence if ev.get("sql")]
            if queries:
                lines.append("<details><summary>Evidence queries</summary>")
                for ev in queries:
                    params = dumps(ev.get("params") or {})
                    lines.append(
                        f"<p><code>{h(ev.get('id'))}</code>:</p>"
                        f'<pre><code class="sql">{code(ev["sql"])}\n-- params: {code(params)}'
                        "</code></pre>"
                    )
                lines.append("</details>")
        lines.append("</section>")
    usage = agent.get("usage") or {}
    if agent.get("mode") == "claude":
        lines.append(
            f'<p class="muted">Model use: {int(usage.get("requests", 0))} requests, '
            f"{int(usage.get('input_tokens', 0)):,} input and "
            f"{int(usage.get('output_tokens', 0)):,} output tokens, about "
            f"${float(usage.get('cost_usd', 0.0)):.2f}.</p>"
        )
    return lines


def _findings(result: dict[str, Any]) -> list[str]:
    findings = result.get("findings") or []
    accepted = [f for f in findings if f.get("status") == "accepted"]
    dismissed = [f for f in findings if f.get("status") != "accepted"]
    lines: list[str] = []
    if accepted:
        lines += [
            "<h2>Findings</h2>",
            "<table><tr><th>finding</th><th>before</th><th>after</th><th>share</th><th>p</th></tr>",
        ]
        reported = [
            s for key in ("root_causes", "drivers", "offsetting") for s in result.get(key) or []
        ]
        places = decimals(v for f in accepted for v in (f.get("measured") or {}).values())
        for f in accepted:
            measured = f.get("measured") or {}
            written = f.get("segment") or {}
            name = reported_name(written, reported)
            label = segment_html(name)
            if name != written:
                label += f' <span class="muted">(written as {segment_html(written)})</span>'
            lines.append(
                f"<tr><td>{label} ({h(f.get('category'))})</td>"
                f'<td class="n">{_num(measured.get("baseline"), places=places)}</td>'
                f'<td class="n">{_num(measured.get("comparison"), places=places)}</td>'
                f'<td class="n">{_share(f.get("share"))}</td>'
                f'<td class="n">{_p(f.get("p_value"))}</td></tr>'
            )
        lines += [
            "</table>",
            '<p class="muted">Each finding\'s numbers were re-computed by its own query before it '
            "was accepted (<code>result.json</code>: <code>findings[].sql</code>, "
            "<code>params</code>).</p>",
        ]
    if dismissed:
        lines += ["<h3>Dismissed by the evidence gate</h3>", "<ul>"]
        lines += [
            f"<li>{segment_html(f.get('segment'))} ({h(f.get('category'))}): "
            f"{h(f.get('critique'), 400)}</li>"
            for f in dismissed
        ]
        lines.append("</ul>")
    return lines


def _similar(result: dict[str, Any]) -> list[str]:
    past = result.get("similar_investigations") or []
    if not past:
        return []
    lines = ["<h2>Similar past investigations</h2>"]
    if any(p.get("same_data") is False for p in past):
        lines.append(f"<p>{OTHER_DATA_NOTE.format(mark='<strong>Other data</strong>')}</p>")
    lines.append("<ul>")
    for p in past:
        causes = "; ".join(h(c) for c in p.get("root_causes") or []) or "no root cause"
        score = p.get("score")
        sim = f"{score:.2f}" if isinstance(score, int | float) else "n/a"
        other = ", <strong>other data</strong>" if p.get("same_data") is False else ""
        lines.append(
            f"<li>{h(p.get('date'))}{other}: {h(p.get('metric'))}, {h(p.get('periods'))}: "
            f"{causes} (similarity {sim}, run <code>{h(p.get('run_id'))}</code>)</li>"
        )
    return [*lines, "</ul>"]


def _check(result: dict[str, Any], db: str | None) -> list[str]:
    lines = ["<h2>Check it yourself</h2>"]
    commands = []
    for rc in result.get("root_causes") or []:
        ev = rc.get("evidence")
        if ev and ev.get("tool"):
            args = dumps(ev.get("arguments") or {})
            quoted = "'" + args.replace("'", "'\\''") + "'"
            where = shlex.quote(db) if db else "DB"
            commands.append(f"{drilldown_command()} tool {ev['tool']} --db {where} --args {quoted}")
    if commands:
        lines.append("<p>Each root cause comes from a query anyone can re-run:</p>")
        lines += [f"<pre><code>{code(c)}</code></pre>" for c in commands]
    stats = result.get("stats") or {}
    searched = stats.get("search_dimensions") or result.get("dimensions") or []
    segments = stats.get("segments", 0)
    lines.append(
        f'<p class="muted">Searched {int(segments) if isinstance(segments, int) else 0:,} '
        f"segments over {', '.join(h(d) for d in searched)} (up to "
        f"{h(stats.get('max_depth'))} columns at a time).</p>"
    )
    notes = result.get("notes") or []
    if notes:
        lines += ["<ul>", *[f"<li>{h(n, 400)}</li>" for n in notes], "</ul>"]
    return lines
