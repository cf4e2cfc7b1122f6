"""report.html and its charts, on real investigations: the demo data loaded by the real loader,
investigated by the CLI (offline), then drawn and rendered as a reader gets them."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tasks.engine.result import Explanation
from tasks.report.charts import daily_series, waterfall_bars
from tasks.report.files import charts_markdown, render_html, write_report_files
from tasks.report.markdown import fmt, render, segment_text
from tests.support.report_tables import (
    SEGMENT_SECTIONS,
    html_tables,
    md_tables,
    named_twice,
    one_precision,
    places,
)

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
DEMO_WEEKS = ("2024-03-18:2024-03-24", "2024-03-25:2024-03-31")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Each question: investigate arguments after the data path. All run at once in one fixture.
QUESTIONS: dict[str, list[str]] = {
    "demo": ["--metric", "sum(revenue)", "--table", "events", "--time-column", "date"],
    "ratio": [
        "--metric",
        "sum(revenue) / sum(sessions)",
        "--filter",
        "country!=IN",
        "--table",
        "events",
        "--time-column",
        "date",
    ],  # fmt: skip
    # Daily active users did not move in the demo weeks: not significant, no root causes.
    "dau": [
        "--metric",
        "count(distinct user_id)",
        "--grain",
        "day",
        "--table",
        "events",
        "--time-column",
        "date",
    ],  # fmt: skip
}


def _weekly_csv() -> str:
    """A question by period label: revenue per week label; ios on 5.2 falls in w2."""
    rows = ["order_id,week,platform,app_version,country,revenue"]
    for week in ("w1", "w2"):
        for platform in ("ios", "android", "web"):
            for version in ("5.1", "5.2"):
                for country in ("US", "GB", "IN", "BR", "DE"):
                    for i in range(8):
                        value = 10 + (i * 7) % 5
                        if week == "w2" and platform == "ios" and version == "5.2":
                            value *= 0.2
                        order = len(rows)
                        rows.append(f"{order},{week},{platform},{version},{country},{value:.2f}")
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every question investigated by the CLI (in parallel), each on its own copy of the demo
    database built by the real loader; then ``write_report_files`` on each, timed."""
    from tasks.ingest.load import load_files

    root = tmp_path_factory.mktemp("report-files")
    demo_db = root / "loaded.duckdb"
    load_files([DEMO / "events.csv", DEMO / "users.csv"], demo_db)
    weekly = root / "weekly.csv"
    weekly.write_text(_weekly_csv(), encoding="utf-8")
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    procs: dict[str, tuple[subprocess.Popen[str], Path, Path]] = {}
    # Questions on other data, loaded by the CLI itself: (file, investigate arguments).
    csv_jobs = {
        "labels": (weekly, [
            "--metric", "sum(revenue)", "--period-column", "week", "--baseline", "w1",
            "--comparison", "w2",
        ]),
        "timestamps": (ROOT / "tests" / "data" / "visits.csv", [
            "--metric", "sum(visits)", "--time-column", "ts", "--baseline",
            "2024-01-01:2024-01-07", "--comparison", "2024-01-08:2024-01-14",
        ]),
    }  # fmt: skip
    jobs = {name: (None, args) for name, args in QUESTIONS.items()} | csv_jobs
    for name, (csv, args) in jobs.items():
        out = root / name
        if csv is not None:
            data, db = csv, out / "data.duckdb"
        else:
            data = db = root / f"{name}.duckdb"
            shutil.copy(demo_db, db)
            args = [*args, "--baseline", DEMO_WEEKS[0], "--comparison", DEMO_WEEKS[1]]
        cmd = [sys.executable, "-m", "drilldown.cli", "investigate", str(data), *args]
        cmd += ["--offline", "--no-remember", "--out", str(out)]
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        procs[name] = (proc, out, db)
    for name, (proc, _, _) in procs.items():
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {stderr}"
    got: dict[str, dict[str, Any]] = {}
    for name, (_, out, db) in procs.items():
        result = json.loads((out / "result.json").read_text(encoding="utf-8"))
        paths = write_report_files(result, out, db)
        got[name] = {"result": result, "out": out, "db": db, "paths": paths}
    return got


@pytest.fixture(scope="module")
def demo(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return runs["demo"]


@pytest.fixture(scope="module")
def page(demo: dict[str, Any]) -> str:
    return (demo["out"] / "report.html").read_text(encoding="utf-8")


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """(type, payload) of every chunk."""
    chunks, i = [], 8
    while i < len(data):
        (length,) = struct.unpack(">I", data[i : i + 4])
        chunks.append((data[i + 4 : i + 8], data[i + 8 : i + 8 + length]))
        i += 12 + length
    return chunks


ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "b", "code", "table",
    "tr", "th", "td", "ul", "li", "section", "span", "details", "summary", "pre", "figure", "img",
    "figcaption",
}  # fmt: skip


def page_elements(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every element a browser would build from ``page``: (tag, attributes)."""
    from html.parser import HTMLParser

    found: list[tuple[str, dict[str, str | None]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, dict(attrs)))

    Collect().feed(page)
    return found


def assert_inert(page: str, images: int) -> None:
    """Only our tags; no links, scripts, frames or handlers; the only images are data: PNGs."""
    elements = page_elements(page)
    assert {tag for tag, _ in elements} <= ALLOWED_TAGS
    attrs = {name for _, a in elements for name in a}
    assert attrs <= {"lang", "charset", "http-equiv", "content", "name", "class", "src", "alt"}
    srcs = [a["src"] for tag, a in elements if "src" in a]
    assert [tag for tag, a in elements if "src" in a] == ["img"] * images
    assert all(s is not None and s.startswith("data:image/png;base64,") for s in srcs)
    assert page.count("<style>") == 1 and page.count("</body>") == 1


# --- charts ---------------------------------------------------------------------------------


def test_demo_writes_both_charts_and_the_page(demo: dict[str, Any]) -> None:
    out = demo["out"]
    assert demo["paths"] == [
        out / "charts" / "waterfall.png",
        out / "charts" / "timeseries.png",
        out / "report.html",
    ]
    for name in ("waterfall.png", "timeseries.png"):
        data = (out / "charts" / name).read_bytes()
        width, height = png_size(data)
        assert 700 <= width <= 2000 and 300 <= height <= 2000, (name, width, height)
        assert 10_000 < len(data) < 1_000_000
        types = [t for t, _ in png_chunks(data)]
        assert types[-1] == b"IEND"


def test_png_files_are_valid_images(demo: dict[str, Any]) -> None:
    from PIL import Image

    for name in ("waterfall.png", "timeseries.png"):
        with Image.open(demo["out"] / "charts" / name) as img:
            img.verify()
        with Image.open(demo["out"] / "charts" / name) as img:
            img.load()
            colours = img.convert("RGB").getcolors(maxcolors=1_000_000) or []
            assert len(colours) > 20, f"{name} looks blank"


def test_charts_are_deterministic_and_carry_no_metadata(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    again = write_report_files(demo["result"], tmp_path, demo["db"])
    for name in ("waterfall.png", "timeseries.png"):
        first = (demo["out"] / "charts" / name).read_bytes()
        second = (tmp_path / "charts" / name).read_bytes()
        assert first == second, f"{name} differs between two runs"
        kinds = {t for t, _ in png_chunks(first)}
        assert not kinds & {b"tEXt", b"iTXt", b"zTXt", b"tIME"}, kinds
    assert [p.name for p in again] == ["waterfall.png", "timeseries.png", "report.html"]


def test_waterfall_walks_from_before_to_after_through_the_root_causes(
    demo: dict[str, Any],
) -> None:
    r = demo["result"]
    bars = waterfall_bars(r)
    assert bars is not None
    assert [b.name for b in bars] == [
        "Before",
        "platform = ios, app_version = 5.2",
        "Everything else",
        "After",
    ]
    before, cause, rest, after = bars
    assert before.end == pytest.approx(r["baseline"]["value"])
    assert after.end == pytest.approx(r["comparison"]["value"])
    assert cause.value == pytest.approx(r["root_causes"][0]["contribution"])
    assert cause.start == pytest.approx(before.end) and rest.start == pytest.approx(cause.end)
    assert rest.end == pytest.approx(after.end)
    assert cause.value + rest.value == pytest.approx(r["change"]["absolute"])
    assert cause.color != rest.color != before.color  # down in red, the rest lighter, totals apart
    assert cause.note == "-2,207 (80.3% of the change)"


def test_timeseries_days_add_up_to_the_periods(demo: dict[str, Any]) -> None:
    r = demo["result"]
    series = daily_series(r, demo["db"])
    everything, top = series[0], series[1]
    assert everything.segment == {} and top.segment == r["root_causes"][0]["segment"]
    assert len(series) == 1 + min(3, len(r["root_causes"]))
    assert [d.isoformat() for d in top.baseline.days][::6] == ["2024-03-18", "2024-03-24"]
    assert [d.isoformat() for d in top.comparison.days][::6] == ["2024-03-25", "2024-03-31"]
    assert sum(everything.baseline.values) == pytest.approx(r["baseline"]["value"])
    assert sum(everything.comparison.values) == pytest.approx(r["comparison"]["value"])
    rc = r["root_causes"][0]
    assert sum(top.baseline.values) == pytest.approx(rc["baseline"])
    assert sum(top.comparison.values) == pytest.approx(rc["comparison"])
    assert top.period_value("comparison") == pytest.approx(rc["comparison"])


@pytest.mark.parametrize("name", ["ratio", "dau"])
def test_timeseries_rebuilds_ratio_and_daily_metrics(
    runs: dict[str, dict[str, Any]], name: str
) -> None:
    run = runs[name]
    r = run["result"]
    assert (run["out"] / "charts" / "timeseries.png").is_file()
    series = daily_series(r, run["db"])
    assert len(series) == 1 + min(3, len(r["root_causes"]))
    everything = series[0]
    assert everything.period_value("baseline") == pytest.approx(r["baseline"]["value"])
    assert everything.period_value("comparison") == pytest.approx(r["comparison"]["value"])
    by_segment = {json.dumps(rc["segment"], sort_keys=True): rc for rc in r["root_causes"]}
    for s in series[1:]:
        rc = by_segment[json.dumps(s.segment, sort_keys=True)]
        assert s.period_value("baseline") == pytest.approx(rc["baseline"])
        assert s.period_value("comparison") == pytest.approx(rc["comparison"])
    if name == "dau":  # the average day is the period's value
        days = everything.baseline.values
        assert sum(days) / len(days) == pytest.approx(r["baseline"]["value"])
    else:  # a ratio is summed numerator over summed denominator, not an average of days
        assert r["metric"]["filters"] and r["root_causes"]  # filtered population, named causes
        b = everything.baseline
        assert b.denominator is not None
        assert sum(b.numerator) / sum(b.denominator) == pytest.approx(r["baseline"]["value"])


def test_quiet_weeks_still_get_charts_without_root_causes(runs: dict[str, dict[str, Any]]) -> None:
    run = runs["dau"]
    r = run["result"]
    assert not r["change"]["significant"] and r["root_causes"] == []
    assert [p.name for p in run["paths"]] == ["waterfall.png", "timeseries.png", "report.html"]
    bars = waterfall_bars(r)
    assert bars is not None and [b.name for b in bars] == ["Before", "Change", "After"]
    assert bars[0].end == pytest.approx(r["baseline"]["value"])
    assert bars[1].value == pytest.approx(r["change"]["absolute"])
    series = daily_series(r, run["db"])
    assert [s.segment for s in series] == [{}]
    page = (run["out"] / "report.html").read_text(encoding="utf-8")
    assert "This change is <b>not significant</b>" in page
    assert "<h2>Root causes</h2>" not in page
    assert_inert(page, images=2)


def test_period_label_questions_get_no_timeseries(runs: dict[str, dict[str, Any]]) -> None:
    run = runs["labels"]
    r = run["result"]
    assert r["baseline"]["label"] == "w1" and r["root_causes"]
    assert [p.name for p in run["paths"]] == ["waterfall.png", "report.html"]
    assert not (run["out"] / "charts" / "timeseries.png").exists()
    assert daily_series(r, run["db"]) == []
    page = (run["out"] / "report.html").read_text(encoding="utf-8")
    assert_inert(page, images=1)
    assert charts_markdown(run["paths"]) == (
        "## Charts\n\n![Contribution waterfall](charts/waterfall.png)\n"
    )


def test_timestamp_days_split_at_midnight(runs: dict[str, dict[str, Any]]) -> None:
    run = runs["timestamps"]
    r = run["result"]
    assert [p.name for p in run["paths"]] == ["waterfall.png", "timeseries.png", "report.html"]
    everything = daily_series(r, run["db"])[0]
    # 23:59:59 on the 7th stays in the baseline; 00:00:00 on the 8th opens the comparison.
    assert everything.baseline.values == [5, 0, 0, 0, 0, 0, 3]
    assert everything.comparison.values == [11, 0, 0, 0, 0, 0, 2]
    assert everything.baseline.present == [True, False, False, False, False, False, True]
    assert everything.period_value("baseline") == pytest.approx(r["baseline"]["value"])
    assert everything.period_value("comparison") == pytest.approx(r["comparison"]["value"])
    page = (run["out"] / "report.html").read_text(encoding="utf-8")
    assert_inert(page, images=2)
    assert "<h2>Data quality first</h2>" in page
    assert page.count('<p class="dq') == len(r["data_quality"]) > 0


# --- report.html ------------------------------------------------------------------------------


def test_page_states_the_change_and_its_significance(demo: dict[str, Any], page: str) -> None:
    r = demo["result"]
    assert "<h1>Why did sum(revenue) move?</h1>" in page
    headline = re.search(r'<p class="headline">(.*?)</p>', page)
    assert headline is not None
    for number in (
        fmt(r["baseline"]["value"]),
        fmt(r["comparison"]["value"]),
        fmt(r["change"]["absolute"]),
        fmt(r["change"]["relative"], "percent"),
    ):
        assert number in headline.group(1)
    assert ("12,761", "10,011", "-2,750", "-21.5%") == (
        fmt(r["baseline"]["value"]),
        fmt(r["comparison"]["value"]),
        fmt(r["change"]["absolute"]),
        fmt(r["change"]["relative"], "percent"),
    )
    assert f"This change is <b>significant</b> (p = {r['change']['p_value']:.2g}" in page


def test_page_names_the_root_cause_with_its_numbers(demo: dict[str, Any], page: str) -> None:
    rc = demo["result"]["root_causes"][0]
    section = page.split("<h2>Root causes</h2>", 1)[1].split("<h2>", 1)[0]
    row = re.search(
        r"<tr><td><b>platform</b> = ios, <b>app_version</b> = 5\.2</td>(.*?)</tr>", section
    )
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    # the metric's values at one precision, the report's (the smallest figure it prints
    # decides how many places), the change at its own
    shown = places(cells[0])
    assert shown is not None and places(cells[1]) == shown
    assert cells[:3] == [
        fmt(rc["baseline"], decimals=shown),
        fmt(rc["comparison"], decimals=shown),
        fmt(rc["contribution"], decimals=places(cells[2])),
    ]
    assert cells[3:] == [
        f"{rc['share'] * 100:.1f}%",
        rc["effect"],
        f"{rc['p_value']:.2g}",
    ]
    assert "Together they account for 80.3% of the total change of -2,750." in section


def test_page_lists_every_hypothesis_with_verdict_and_sql(demo: dict[str, Any], page: str) -> None:
    import html

    labels = {"confirmed": "Confirmed", "ruled_out": "Ruled out", "inconclusive": "Inconclusive"}
    hyps = demo["result"]["hypotheses"]
    assert {h["status"] for h in hyps} >= {"confirmed", "ruled_out"}
    sections = page.split('<section class="hypothesis">')[1:]
    assert len(sections) == len(hyps)
    for h, sec in zip(hyps, sections, strict=True):
        status = h["status"]
        assert f'<span class="badge {status}">{labels[status]}</span>' in sec
        assert html.escape(h["title"]) in sec
        assert "<details><summary>Evidence queries</summary>" in sec
        for ev in h["evidence"]:
            if ev.get("sql"):
                assert html.escape(ev["sql"], quote=False) in sec
    # the accepted finding is the root cause: the Findings table does not repeat it
    assert "<h2>Findings</h2>" not in page
    findings = page.split("Each finding's numbers were re-computed", 1)[1]
    dismissed = [f for f in demo["result"]["findings"] if f["status"] != "accepted"]
    ruled_out = {h["id"] for h in hyps if h["status"] == "ruled_out"}
    assert dismissed
    for f in dismissed:
        # a finding of a ruled-out hypothesis is said there, with its critique, once
        where = html.unescape(page if f["hypothesis_id"] in ruled_out else findings)
        assert where.count(f["critique"]) == 1
    assert ("Dismissed by the evidence gate" in findings) is any(
        f["hypothesis_id"] not in ruled_out for f in dismissed
    )


def test_page_is_standalone_and_inert(demo: dict[str, Any], page: str) -> None:
    assert (
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">" in page
    )
    assert_inert(page, images=2)
    lowered = page.lower()
    assert "http:" not in lowered and "https:" not in lowered and "url(" not in lowered
    srcs = re.findall(r'\bsrc="([^"]*)"', page)
    for name, src in zip(("waterfall.png", "timeseries.png"), srcs, strict=True):
        assert src.startswith("data:image/png;base64,")
        decoded = base64.b64decode(src.split(",", 1)[1])
        assert decoded == (demo["out"] / "charts" / name).read_bytes()


def test_charts_markdown_links_only_our_files(demo: dict[str, Any]) -> None:
    md = charts_markdown(demo["paths"])
    assert md == (
        "## Charts\n\n"
        "![Contribution waterfall](charts/waterfall.png)\n\n"
        "![The metric per day, before and after](charts/timeseries.png)\n"
    )
    assert charts_markdown([Path("charts/evil.png"), Path("elsewhere/waterfall.png")]) == ""
    assert charts_markdown([]) == ""


# --- one name per segment, one precision per column ---------------------------------------------


def rendered(run: dict[str, Any]) -> dict[str, dict[str, list[list[str]]]]:
    out = run["out"]
    return {
        "report.md": md_tables((out / "report.md").read_text(encoding="utf-8")),
        "report.html": html_tables((out / "report.html").read_text(encoding="utf-8")),
    }


@pytest.mark.parametrize("question", ["demo", "ratio"])
def test_numbers_in_a_column_share_one_precision(
    runs: dict[str, dict[str, Any]], question: str
) -> None:
    for name, tables in rendered(runs[question]).items():
        assert tables.get("Root causes"), f"{name}: no root-cause table"
        for title in SEGMENT_SECTIONS:
            rows = tables.get(title, [])
            # before and after are one quantity in two periods: one precision for both
            assert one_precision(rows, (1, 2)), (name, title, [r[1:3] for r in rows])
            assert one_precision(rows, (3,)), (name, title, [r[3] for r in rows])
        assert one_precision(tables.get("Findings", []), (1, 2)), (name, tables.get("Findings"))


@pytest.mark.parametrize("question", ["demo", "ratio"])
def test_the_report_names_each_segment_once(runs: dict[str, dict[str, Any]], question: str) -> None:
    for name, tables in rendered(runs[question]).items():
        assert [r for title in SEGMENT_SECTIONS for r in tables.get(title, [])]
        assert not named_twice(tables), f"{name}: the same rows twice: {named_twice(tables)}"


def test_other_movers_leave_out_the_root_cause_s_parts_and_what_holds_it(
    demo: dict[str, Any],
) -> None:
    """A segment inside or above the root cause is the cause seen again: no table lists it."""
    r = demo["result"]
    [rc] = r["root_causes"]
    cause = rc["segment"]
    inside = [
        d for d in r["drivers"] if d["segment"] != cause and cause.items() <= d["segment"].items()
    ]
    holding = [
        d for d in r["drivers"] if d["segment"] != cause and d["segment"].items() <= cause.items()
    ]
    assert inside and holding, "the demo's drivers hold parts of the root cause and its parents"
    md = (demo["out"] / "report.md").read_text(encoding="utf-8")
    for d in [*inside, *holding]:
        assert f"| {segment_text(d['segment'])} " not in md


def test_a_part_of_a_root_cause_moving_against_it_is_marked(demo: dict[str, Any]) -> None:
    r = copy.deepcopy(demo["result"])
    [rc] = r["root_causes"]
    against = {**rc, "segment": {**rc["segment"], "country": "DE"}, "aliases": []}
    against.update(contribution=55.0, share=-0.02, baseline=10.0, comparison=65.0)
    along = {**rc, "segment": {**rc["segment"], "country": "FR"}, "aliases": []}
    along.update(contribution=-45.0, share=0.016, baseline=50.0, comparison=5.0)
    r["offsetting"] = [against]
    r["drivers"] = [along, *r["drivers"]]
    md = render(Explanation.model_validate(r))
    page = render_html_of(r)
    cause = segment_text(rc["segment"])
    assert f"| {segment_text(against['segment'])} (part of root cause {cause}) |" in md
    assert f"| {segment_text(along['segment'])} |" not in md
    assert "(part of root cause <b>platform</b> = ios, <b>app_version</b> = 5.2)" in page
    assert "<b>country</b> = FR" not in page


def render_html_of(result: dict[str, Any]) -> str:
    from tasks.report.files import render_html

    return render_html(result, {})


# --- hostile text -------------------------------------------------------------------------------

IMG = "<img src=x onerror=alert(1)>"
TITLE = "![x](https://attacker.example) <script>alert(2)</script>"
# mathtext, a direction override, glyphs the font lacks, a terminal escape sequence
ODD = "$\\frac{1}{0}$ \u202e🚀 中文 \x1b[2J"
SVG = "<svg onload=alert(8)>"


def _hostile(result: dict[str, Any]) -> dict[str, Any]:
    r = copy.deepcopy(result)
    rc = r["root_causes"][0]
    rc["segment"] = {"platform": IMG, "app_version": ODD}
    rc["aliases"] = [{"country": SVG}]
    rc["evidence"]["arguments"]["filters"] = [
        {"column": "platform", "op": "=", "value": IMG},
        {"column": "app_version", "op": "=", "value": ODD},
    ]
    r["drivers"][0]["segment"] = {'"><script>alert(3)</script>': "javascript:alert(4)"}
    h = r["hypotheses"][0]
    h["title"] = TITLE
    h["summary"] = '<a href="https://attacker.example/x">click</a> www.attacker.example'
    h["evidence"][0]["sql"] = "SELECT 1 </code></pre><script>alert(5)</script>"
    h["evidence"][0]["result"]["summary"] = "<iframe src=https://attacker.example>"
    r["findings"][1]["critique"] = "<img src=https://attacker.example/pixel.png>"
    r["data_quality"] = [
        {
            "kind": "null_spike",
            "severity": "warning",
            "message": "<style>body{display:none}</style>",
        }
    ]
    r["similar_investigations"] = [
        {
            "score": 0.9,
            "date": "2024-01-01",
            "metric": "<b onmouseover=alert(6)>rev</b>",
            "periods": "![p](http://attacker.example)",
            "root_causes": [IMG],
            "run_id": "inv-1</code><script>",
        }
    ]
    r["notes"] = ["see https://attacker.example/notes <script>alert(7)</script>"]
    return r


def test_hostile_text_renders_escaped(demo: dict[str, Any], tmp_path: Path) -> None:
    r = _hostile(demo["result"])
    paths = write_report_files(r, tmp_path, demo["db"])
    assert [p.name for p in paths] == ["waterfall.png", "timeseries.png", "report.html"]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert_inert(page, images=2)
    assert "https://attacker" not in page and "http://attacker" not in page
    # What a reader sees instead: the text itself, inert.
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "(also: <b>country</b> = &lt;svg onload=alert(8)&gt;)" in page
    assert "![x](hxxps://attacker.example) &lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert "&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;alert(5)&lt;/script&gt;" in page
    assert "jxxxxxxxxt:alert(4)" in page and "www[.]attacker.example" in page
    past = page.split("<h2>Similar past investigations</h2>", 1)[1].split("</ul>", 1)[0]
    assert "&lt;b onmouseover=alert(6)&gt;rev&lt;/b&gt;, ![p](hxxp://attacker.example)" in past
    assert "(similarity 0.90, run <code>inv-1&lt;/code&gt;&lt;script&gt;</code>)" in past
    assert (
        "<li>see hxxps://attacker.example/notes &lt;script&gt;alert(7)&lt;/script&gt;</li>" in page
    )
    assert "<b>null spike</b> (warning): &lt;style&gt;body{display:none}&lt;/style&gt;" in page
    # The hostile segment was queried as a value (it matches no rows), never as SQL.
    top = daily_series(r, demo["db"])[1]
    assert top.segment["platform"] == IMG
    assert sum(top.baseline.values) == 0 and sum(top.comparison.values) == 0
    bars = waterfall_bars(r)
    assert (
        bars is not None
        and bars[1].name
        == f"platform = {IMG}, app_version = $\\frac{{1}}{{0}}$ \\u202e🚀 中文 \\x1b[2J"
    )
    assert "\u202e" not in page and "\x1b" not in page
    assert "$\\frac{1}{0}$ \\u202e🚀 中文 \\x1b[2J" in page


def test_a_data_problem_comes_first_on_the_page(demo: dict[str, Any], tmp_path: Path) -> None:
    """A root cause the data explains: the headline says so before any root cause, with the
    note's days, and the note's text stays inert."""
    r = copy.deepcopy(demo["result"])
    rc = r["root_causes"][0]
    rc["effect"] = "data_quality"
    rc["data_quality"] = {
        "kinds": ["segment_missing_days"],
        "message": f"no rows on 2024-03-27 {IMG}",
        "explained": True,
    }
    page = render_html(r)
    first = page.index('<p class="datafirst">')
    assert first < page.index("<h2>Root causes</h2>")
    assert "This drop is a data problem first" in page[first:]
    assert "<li>no rows on 2024-03-27 &lt;img src=x onerror=alert(1)&gt;</li>" in page
    assert_inert(page, images=0)
    # a business cause keeps the headline as it was
    assert '<p class="datafirst">' not in render_html(demo["result"])


def test_unreadable_database_leaves_out_only_the_timeseries(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    paths = write_report_files(demo["result"], tmp_path, tmp_path / "missing.duckdb")
    assert [p.name for p in paths] == ["waterfall.png", "report.html"]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "No per-day chart: the data could not be read" in page
    assert_inert(page, images=1)


def test_movers_that_follow_from_the_root_causes_are_marked(
    demo: dict[str, Any], page: str
) -> None:
    """The US fell with the release (its users run it): it is folded into the root cause, with
    the reason in words, in report.md and report.html, not shown as a mover of its own."""
    r = demo["result"]
    us = next(d for d in r["drivers"] if d["segment"] == {"country": "US"})
    assert us["explained_by_root_causes"] is True
    text = (demo["out"] / "report.md").read_text(encoding="utf-8")
    head = "Folded into the root causes, each with its part of the total change of -2,750: "
    folded = head + "country = US (-2,041, 74.2%)"
    assert folded in text and "| country = US" not in text
    assert "hold the root causes' rows" in text.split(folded, 1)[1].split("\n", 1)[0]
    assert head + "<b>country</b> = US (-2,041, 74.2%)" in page
