"""One consistent story in every report: five questions investigated by the CLI (offline) on small
CSV files loaded by the real loader, read as report.md and report.html the way a reader gets
them. report.html is checked with an HTML parser (no headless browser installs from the package
registry here)."""

from __future__ import annotations

import copy
import datetime as dt
import html
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tasks.engine.result import Explanation
from tasks.report.charts import waterfall_bars
from tasks.report.files import render_html
from tasks.report.markdown import defang, render, segment_text
from tests.report.test_report_files import _weekly_csv as _labels_csv
from tests.support.report_tables import SEGMENT_SECTIONS, html_tables, md_tables, places

ROOT = Path(__file__).resolve().parents[2]
WEEKS = ["--baseline", "2024-03-18:2024-03-24", "--comparison", "2024-03-25:2024-03-31"]


def _offsetting_csv() -> str:
    """Daily revenue where android falls by 38% and ios rises by 40%: the net barely moves."""
    rows = ["date,platform,country,revenue"]
    start = dt.date(2024, 3, 18)
    for d in range(14):
        day = start + dt.timedelta(days=d)
        for platform in ("ios", "android", "web", "tv", "desktop"):
            for country in ("US", "GB", "DE", "BR"):
                for i in range(12):
                    value = 100 + (i * 7 + d * 3) % 5
                    if d >= 7 and platform == "ios":
                        value *= 1.4
                    if d >= 7 and platform == "android":
                        value *= 0.62
                    rows.append(f"{day},{platform},{country},{value:.2f}")
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The five questions, investigated at once in their own processes."""
    root = tmp_path_factory.mktemp("story")
    labels, offsetting = root / "weekly.csv", root / "offsetting.csv"
    labels.write_text(_labels_csv(), encoding="utf-8")
    offsetting.write_text(_offsetting_csv(), encoding="utf-8")
    events = ROOT / "data" / "demo" / "events.csv"
    daily = ["--time-column", "date", *WEEKS]
    jobs = {
        "demo": (events, ["--metric", "sum(revenue)", *daily]),
        "ratio": (events, ["--metric", "sum(revenue) / sum(sessions)", "--filter", "country!=IN",
                           *daily]),
        "filtered": (events, ["--metric", "sum(revenue)", "--filter", "country!=IN", *daily]),
        "labels": (labels, ["--metric", "sum(revenue)", "--period-column", "week",
                            "--baseline", "w1", "--comparison", "w2"]),
        "offsetting": (offsetting, ["--metric", "sum(revenue)", *daily]),
    }  # fmt: skip
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    procs = {}
    for name, (data, args) in jobs.items():
        out = root / name
        cmd = [sys.executable, "-m", "drilldown.cli", "investigate", str(data), *args]
        cmd += ["--offline", "--no-remember", "--out", str(out)]
        procs[name] = (
            subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True),
            out,
        )  # fmt: skip
    got = {}
    for name, (proc, out) in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {stderr}"
        got[name] = {
            "printed": stdout,
            "result": json.loads((out / "result.json").read_text(encoding="utf-8")),
            "md": (out / "report.md").read_text(encoding="utf-8"),
            "html": (out / "report.html").read_text(encoding="utf-8"),
        }
    return got


ALL = ["demo", "ratio", "filtered", "labels", "offsetting"]
SHARE = re.compile(r"(-?[\d,]+\.\d)%")


def page_text(page: str, code: bool = True) -> str:
    """What a reader sees of report.html: the text of the body, tags gone, entities decoded
    (without ``code``: the quoted commands and queries left out too)."""
    hidden = ("style", "title") if code else ("style", "title", "pre", "code")

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.parts: list[str] = []
            self.skip = 0

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            self.skip += tag in hidden

        def handle_endtag(self, tag: str) -> None:
            self.skip -= tag in hidden

        def handle_data(self, data: str) -> None:
            if not self.skip:
                self.parts.append(data)

    parser = Text()
    parser.feed(page)
    return "".join(parser.parts)


def worded(md: str) -> str:
    """report.md without what it quotes: fenced blocks (commands, SQL) and inline code."""
    text = re.sub(r"^```.*?^```", "", md, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def headline(md: str) -> str:
    return next(line for line in md.splitlines() if line.startswith("**"))


@pytest.mark.parametrize("name", ["ratio", "filtered"])
def test_the_headline_states_the_question_with_its_filters(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    r = reports[name]
    assert r["result"]["metric"]["filters"] == [{"column": "country", "op": "!=", "value": "IN"}]
    metric = {"ratio": "sum(revenue) / sum(sessions)", "filtered": "sum(revenue)"}[name]
    assert headline(r["md"]).startswith(f"**{metric}** on `events` where country \\!= IN went")
    assert f"{metric} on events where country != IN went from" in page_text(r["html"])


def test_segments_inside_or_above_a_root_cause_are_folded_into_it(
    reports: dict[str, dict[str, Any]],
) -> None:
    """The demo's 9 overlapping movers: none is listed again; the US, which the root cause
    explains, is folded into it with the reason in words."""
    for name in ALL:
        r = reports[name]
        causes = [c["segment"] for c in r["result"]["root_causes"]]
        for tables in (md_tables(r["md"]), html_tables(r["html"])):
            rows = [row for t in SEGMENT_SECTIONS[1:] for row in tables.get(t, [])]
            listed = [row[0].split(" (")[0] for row in rows]
            for cause in causes:
                overlapping = [
                    segment_text(s["segment"])
                    for s in r["result"]["drivers"] + r["result"]["offsetting"]
                    if s["segment"].items() <= cause.items()
                    or cause.items() <= s["segment"].items()
                ]
                assert not set(listed) & {re.sub(r"\\(.)", r"\1", o) for o in overlapping}, name
    md = reports["demo"]["md"]
    folded = next(line for line in md.splitlines() if line.startswith("Folded into the root"))
    assert "country = US (-2,041, 74.2%)" in folded and "hold the root causes' rows" in folded
    assert "follows from the root causes" not in md


@pytest.mark.parametrize("name", ALL)
def test_the_rest_of_the_change_is_said_in_words(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    r = reports[name]
    bars = waterfall_bars(r["result"])
    assert bars is not None
    rest = next(b for b in bars if b.name == "Everything else")
    for text in (r["md"], page_text(r["html"])):
        line = next(x for x in text.splitlines() if x.startswith("Everything else: "))
        number = line.split()[2].rstrip(",").lstrip("+")
        digits = places(number)
        assert digits is not None, line
        assert float(number.replace(",", "")) == pytest.approx(rest.value, abs=10**-digits)
        assert "spread over" in line


@pytest.mark.parametrize("name", ALL)
def test_one_number_format_per_quantity(reports: dict[str, dict[str, Any]], name: str) -> None:
    """The metric's values (headline, tables) share one precision, and so do its changes
    (headline, contributions, the rest)."""
    md = reports[name]["md"]
    first = headline(md)
    values = re.findall(r"\*\*(-?[\d,.]+)\*\*", first)
    change = re.search(r": ([+-][\d,.]+) \(", first)
    assert len(values) == 2 and change
    tables = md_tables(md)
    rows = [row for t in SEGMENT_SECTIONS for row in tables.get(t, [])] + tables.get("Findings", [])
    value_cells = values + [c for row in rows for c in row[1:3]]
    rest = next(x for x in md.splitlines() if x.startswith("Everything else: ")).split()[2]
    contributions = [row[3] for t in SEGMENT_SECTIONS for row in tables.get(t, [])]
    change_cells = [change.group(1), rest.rstrip(","), *contributions]
    for cells in (value_cells, change_cells):
        found = {places(c.lstrip("+")) for c in cells} - {None}
        assert len(found) == 1, (name, cells)


def test_small_values_keep_their_digits(reports: dict[str, dict[str, Any]]) -> None:
    """0.69 beside thousands is printed 0.69, never 1."""
    r = copy.deepcopy(reports["demo"]["result"])
    r["root_causes"][0]["comparison"] = 0.69
    md = render(Explanation.model_validate(r))
    row = md_tables(md)["Root causes"][0]
    assert row[2] == "0.69" and row[1] == "2,906.94"
    assert "0.69" in page_text(render_html(r))


def test_nothing_listed_as_a_cause_is_dismissed_or_offsetting(
    reports: dict[str, dict[str, Any]],
) -> None:
    r = copy.deepcopy(reports["demo"]["result"])
    [rc] = r["root_causes"]
    r["findings"].append(
        {**r["findings"][0], "status": "dismissed",
         "critique": "effect too small: 4.6% of the change (needs 5%)"}
    )  # fmt: skip
    r["offsetting"] = [copy.deepcopy(rc)]
    for text in (render(Explanation.model_validate(r)), page_text(render_html(r))):
        assert "effect too small" not in text
        assert "Moving the other way" not in text
    assert "Moving the other way" not in reports["offsetting"]["md"]


@pytest.mark.parametrize("name", ALL)
def test_result_json_lists_no_root_cause_among_drivers_or_offsetting(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    """A root cause, under its name or any other name of the same rows, is not listed again
    under drivers or offsetting (the demo's cause was its own first driver; the offsetting
    question's cause was listed as offsetting itself)."""
    r = reports[name]["result"]
    causes = [n for c in r["root_causes"] for n in (c["segment"], *c["aliases"])]
    assert causes, name
    for key in ("drivers", "offsetting"):
        for s in r[key]:
            assert not [n for n in (s["segment"], *s["aliases"]) if n in causes], (key, s)


def test_offsetting_movers_are_said_plainly(reports: dict[str, dict[str, Any]]) -> None:
    """+0.4% net over a -38% fall and a +40% rise: the headline says so, and no share is
    shown beyond the whole movement."""
    r = reports["offsetting"]
    for text in (r["md"], page_text(r["html"])):
        text = text.split("Hypotheses", 1)[0]  # the report's own words, not the planner's
        assert re.search(r"net \+0\.\d% hides larger moves that cancel out: platform = ", text)
        # each move is the segment's own change (android -38%, ios +40%), with its values
        for rc in r["result"]["root_causes"]:
            own = rc["comparison"] / rc["baseline"] - 1
            word = "fell" if own < 0 else "rose"
            said = f"{segment_text(rc['segment'])} {word} {abs(own) * 100:.1f}% (from "
            assert said in text and round(abs(own), 2) in (0.38, 0.40), said
        shares = [float(s.replace(",", "")) for s in SHARE.findall(text)]
        assert shares and all(abs(s) <= 100 for s in shares), shares
        assert "of the gross movement" in text or "share of all movement" in text


def test_ratio_reports_check_the_ratio(reports: dict[str, dict[str, Any]]) -> None:
    md = reports["ratio"]["md"]
    check = md.split("## Check it yourself", 1)[1]
    assert '"agg": "sum", "column": "revenue"' not in check
    assert "numerator and denominator" in check and '"sessions"' in check
    # an evidence line quoting the numerator's figures says whose figures they are
    hyps = md.split("## Hypotheses", 1)[1].split("## Check it yourself", 1)[0]
    numerator = [
        ev
        for h in reports["ratio"]["result"]["hypotheses"]
        for ev in h["evidence"]
        if (ev.get("arguments") or {}).get("metric") == {"agg": "sum", "column": "revenue"}
    ]
    assert numerator
    assert hyps.count("(figures of sum(revenue), the ratio's numerator, not of the ratio)") == len(
        numerator
    )
    assert all("```sql\n-- params" not in s for s in md.split("<details>")[1:])


def test_the_findings_table_does_not_repeat_the_root_causes(
    reports: dict[str, dict[str, Any]],
) -> None:
    for name in ALL:
        r = reports[name]
        causes = {segment_text(c["segment"]) for c in r["result"]["root_causes"]}
        findings = [row[0].split(" (")[0] for row in md_tables(r["md"]).get("Findings", [])]
        assert not causes & set(findings), name


def test_the_search_is_said_once(reports: dict[str, dict[str, Any]]) -> None:
    md = reports["demo"]["md"]
    said = [x for x in md.splitlines() if "segments" in x and "Searched" in x]
    assert len(said) == 1 and "stands out from chance" in said[0]


def test_defanging_leaves_plain_words_alone(reports: dict[str, dict[str, Any]]) -> None:
    assert defang("too little data: 2 rows") == "too little data: 2 rows"
    assert defang("see data:text/html,<b>x") == "see dxxa:text/html,<b>x"
    link = "javascript:alert(1) https://a.example"
    assert defang(link) == "jxxxxxxxxt:alert(1) hxxps://a.example"
    r = copy.deepcopy(reports["demo"]["result"])
    r["hypotheses"][0]["summary"] = "too little data: 2 rows; data:text/html,x"
    for text in (render(Explanation.model_validate(r)), html.unescape(render_html(r))):
        assert "too little data: 2 rows; dxxa:text/html,x" in text


def test_chart_axis_labels_are_compact() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tasks.report.charts import _number_axis

    fig, ax = plt.subplots()
    ax.set_xlim(495e6, 505e6)
    _number_axis(ax.xaxis)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    plt.close(fig)
    assert labels and all(len(x) <= 6 and x.endswith("M") for x in labels), labels
    assert "495M" in labels or "496M" in labels


METHOD_WORDS = re.compile(r"(?i)bonferroni|dispersion|quasi-poisson")


@pytest.mark.parametrize("name", ALL)
def test_reports_say_the_method_in_plain_words(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    """No report of the demo data (nor the label periods' one, tested on the leaves' noise)
    names the statistics; docs/method.md does. result.json's reader-facing text neither."""
    r = reports[name]
    for text in (r["md"], page_text(r["html"])):
        assert not METHOD_WORDS.search(text), METHOD_WORDS.search(text)
    said = [r["result"]["change"]["method"], *r["result"]["notes"]]
    said += [f.get("critique") or "" for f in r["result"]["findings"]]
    said += [h["summary"] for h in r["result"]["hypotheses"]]
    assert not [s for s in said if METHOD_WORDS.search(s)]
    if name == "labels":
        assert "compared with how much the 15 most specific segments vary" in r["md"]


def _summaries(result: dict[str, Any]) -> list[str]:
    return [ev["result"]["summary"] for h in result["hypotheses"] for ev in h["evidence"]]


@pytest.mark.parametrize("name", ["demo", "filtered"])
def test_tool_summaries_print_the_metric_as_the_report_does(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    """The same value reads the same in a tool's summary, the planner's text and the report:
    the totals as the headline prints them, the root cause's figures as its row does."""
    r = reports[name]
    before, after = re.findall(r"\*\*(-?[\d,.]+)\*\*", headline(r["md"]))
    [cause] = md_tables(r["md"])["Root causes"]
    said = "\n".join(_summaries(r["result"]))
    assert f"total {before} → {after};" in said, (before, after, said)
    assert f": {cause[1]} → {cause[2]} (" in said, cause
    parent = next(h for h in r["result"]["hypotheses"] if h["title"].startswith("All of"))
    assert f"({cause[3]} of " in parent["summary"], (cause, parent["summary"])
    assert f"total {before} → {after};" in page_text(r["html"])
    assert f"(rate, {cause[4]} of the total change of " in r["printed"]


SHARE_OF = re.compile(r"([+-]?[\d,]+(?:\.\d+)?)% of")


@pytest.mark.parametrize("name", ALL)
def test_no_share_of_a_small_net_change_is_quoted(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    """Offsetting moves make shares of the net change meaningless (-1747% of the delta): the
    report, the planner's verdicts, the tool summaries and the gate's critiques say such a
    move in the metric's units and as a share of the gross movement."""
    r = reports[name]
    said = [r["md"], page_text(r["html"]), r["printed"], *_summaries(r["result"])]
    said += [h["summary"] for h in r["result"]["hypotheses"]]
    said += [f.get("critique") or "" for f in r["result"]["findings"]]
    shares = [float(s.replace(",", "")) for text in said for s in SHARE_OF.findall(text)]
    assert shares and all(abs(s) <= 100 for s in shares), shares
    if name == "offsetting":
        android = next(
            h for h in r["result"]["hypotheses"] if h["title"].startswith("platform = android")
        )
        # android's fall as a share of android's fall and ios's rise together
        gross = (
            r"-[\d,]+(\.\d\d)?, -4\d\.\d% of [\d,]+(\.\d\d)? moved in either direction "
            r"for a net \+[\d,]+(\.\d\d)?"
        )
        assert re.search(rf"\({gross}\)", android["summary"]), android["summary"]
        assert re.search(rf"root cause: platform=android  \(rate, {gross}\)", r["printed"])


def test_a_ratio_hypothesis_says_whose_figures_it_quotes(
    reports: dict[str, dict[str, Any]],
) -> None:
    """A hypothesis of a ratio that rests on the numerator's figures says they are the
    numerator's (one measured with the numerator's and the denominator's quotes the ratio's);
    an evidence line of rows counted says it counts rows."""
    r = reports["ratio"]["result"]
    numerator = {"agg": "sum", "column": "revenue"}
    denominator = {"agg": "sum", "column": "sessions"}

    def quoted(h: dict[str, Any]) -> list[Any]:
        return [(ev.get("arguments") or {}).get("metric") for ev in h["evidence"]]

    quoting = [
        h for h in r["hypotheses"] if numerator in quoted(h) and denominator not in quoted(h)
    ]
    assert quoting
    for h in quoting:
        assert "sum(revenue), the ratio's numerator, not of the ratio" in h["summary"], h
    for name in ("demo", "ratio"):
        md = reports[name]["md"]
        metric = reports[name]["result"]["metric"]["expression"]
        assert md.count(f"(figures are counts of rows, not {metric})") == 1


@pytest.mark.parametrize("name", ["demo", "offsetting"])
def test_the_charts_print_figures_as_the_tables_do(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    """The waterfall's labels and a day chart's title read like the headline and the root
    cause's row (12,761.10, not 12,761; 80.3% of the change, not 80%)."""
    from sql_tools.output import Figures
    from tasks.report.charts import panel_title

    r = reports[name]
    before, after = re.findall(r"\*\*(-?[\d,.]+)\*\*", headline(r["md"]))
    cause = md_tables(r["md"])["Root causes"][0]
    bars = waterfall_bars(r["result"])
    assert bars is not None
    assert bars[0].note == before and bars[-1].note.startswith(f"{after} (")
    of = "all movement" if name == "offsetting" else "the change"
    assert bars[1].note == f"{cause[3]} ({cause[4]} of {of})"
    rc = r["result"]["root_causes"][0]
    title = panel_title("x", rc["baseline"], rc["comparison"], Figures.of(r["result"]).values)
    assert title.startswith(f"x:  {cause[1]} → {cause[2]} (")


@pytest.mark.parametrize("name", ALL)
def test_nothing_reads_plus_zero_or_one_rows(
    reports: dict[str, dict[str, Any]], name: str
) -> None:
    """A rest of nothing is 0, not +0 (-0.0% of the change); one row is one row. Only the
    numbers the report words are read: not the commands and queries it quotes (a path such as
    ``pytest-0/`` in ``--db`` is no number)."""
    for text in (worded(reports[name]["md"]), page_text(reports[name]["html"], code=False)):
        assert not re.search(r"(?<![\d.,])[+-]0(\.0+)?%?(?![\d.,])", text), name
        assert not re.search(r"\b1 rows\b", text), name
    if name == "labels":
        assert "Everything else: 0 (0.0% of the total change of " in reports[name]["md"]


def test_a_cited_past_investigation_of_other_data_is_said_to_be_one(
    reports: dict[str, dict[str, Any]],
) -> None:
    """A hypothesis citing a past investigation that the similar list marks as other data
    says so where it cites it, not a plain "Seen before"."""
    r = copy.deepcopy(reports["demo"]["result"])
    past = {"date": "2026-01-02", "metric": "sum(revenue)", "periods": "a -> b",
            "root_causes": ["platform=ios, app_version=5.2"], "score": 0.5, "run_id": "inv-1"}  # fmt: skip
    r["similar_investigations"] = [{**past, "same_data": False}]
    r["hypotheses"][0]["cites"] = ["inv-1"]
    said = "Seen before on other data (not evidence about this data): past investigation"
    for text in (render(Explanation.model_validate(r)), page_text(render_html(r))):
        assert said in text
    r["similar_investigations"] = [{**past, "same_data": True}]
    md = render(Explanation.model_validate(r))
    assert "Seen before: past investigation `inv-1`" in md and "on other data" not in md
