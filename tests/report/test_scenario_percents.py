"""Every percentage report.md states beside a segment is that segment's own relative change
(after / before - 1) or its share of a whole the sentence names, checked against result.json on
every planted scenario (data/scenarios), investigated end to end by the CLI (offline).

Read are the report's own words: tables and sentences, not the commands and queries it quotes.
In a table, a share is of the whole its column's header names (the change, or all movement)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sql_tools.output import Figures

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "data" / "scenarios"
NAMES = sorted(p.parent.name for p in SCENARIOS.glob("*/expected.json"))
PERCENT = re.compile(r"(?<![\w.])([+-]?[\d,]*\.?\d+)%")
NUMBER = r"([+-]?[\d,]+(?:\.\d+)?)"


def _investigate(name: str, out: Path) -> subprocess.Popen[str]:
    exp = json.loads((SCENARIOS / name / "expected.json").read_text())
    args = [
        "investigate", f"data/scenarios/{name}", "--metric", exp["metric"],
        "--time-column", exp["time_column"], "--baseline", exp["baseline"],
        "--comparison", exp["comparison"], "--offline", "--no-remember", "--out", str(out),
    ]  # fmt: skip
    if exp.get("grain"):
        args += ["--grain", exp["grain"]]
    if exp.get("dimensions"):
        args += ["--dimensions", ",".join(exp["dimensions"])]
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    return subprocess.Popen(
        [sys.executable, "-m", "drilldown.cli", *args], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, str]]:
    """(result.json, report.md) of each scenario, two investigations at a time."""
    root = tmp_path_factory.mktemp("scenario-reports")
    got: dict[str, tuple[dict, str]] = {}
    todo = list(NAMES)
    while todo:
        batch, todo = todo[:2], todo[2:]
        running = [(n, _investigate(n, root / n)) for n in batch]
        for n, proc in running:
            _, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, f"{n}: {err[-3000:]}"
            result = json.loads((root / n / "result.json").read_text(encoding="utf-8"))
            got[n] = (result, (root / n / "report.md").read_text(encoding="utf-8"))
    return got


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _plain(name: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in name.items())


def _segments(result: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each segment the result reports, under each of its names: its values and contribution."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key in ("root_causes", "drivers", "offsetting", "movers"):
        for s in result.get(key) or []:
            for name in (s["segment"], *(s.get("aliases") or [])):
                if name:
                    out.setdefault(_plain(name), []).append(s)
    for f in result.get("findings") or []:
        m = f.get("measured") or {}
        seg = {"baseline": m.get("baseline"), "comparison": m.get("comparison"),
               "contribution": f.get("contribution"), "share": f.get("share")}  # fmt: skip
        if f.get("segment"):
            out.setdefault(_plain(f["segment"]), []).append(seg)
    return out


def _words(md: str) -> Iterator[str]:
    """report.md's lines as a reader reads them: no quoted code, escapes undone."""
    text = re.sub(r"^```.*?^```", "", md, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    for line in text.splitlines():
        yield re.sub(r"\\(.)", r"\1", line)


def _close(said: str, value: float, rounding: float = 0.0) -> bool:
    """``said`` (a percent as printed) is ``value``, allowing for its own last place and for a
    whole printed to ``rounding`` of itself (half its last place over its size)."""
    places = len(said.split(".")[1]) if "." in said else 0
    last = 0.5 * 10**-places + 0.001
    return abs(_num(said) - value) <= last + abs(value) * (1e-3 + rounding)


def _own(seg: dict[str, Any]) -> list[float]:
    """A segment's own relative changes, in percent: over every day, and where a data problem
    set days aside, over the days it has in both periods (``data_quality``)."""
    b, c = seg.get("baseline"), seg.get("comparison")
    out = []
    if isinstance(b, int | float) and isinstance(c, int | float) and b:
        out.append((c - b) / abs(b) * 100)
    dq = seg.get("data_quality") or {}
    out += [dq[k] * 100 for k in ("move", "move_on_clean_days") if isinstance(dq.get(k), float)]
    return out


def _parts_of_own_move(seg: dict[str, Any]) -> list[float]:
    """Shares of a segment's own move a data-quality note says (the missing data's part of its
    move beyond the rest of the data), in percent."""
    dq = seg.get("data_quality") or {}
    u, clean = dq.get("unexpected"), dq.get("unexpected_on_clean_days")
    if isinstance(u, float) and isinstance(clean, float) and u:
        return [(u - clean) / u * 100]
    return []


def _rounding(number: str) -> float:
    """Half the last printed place of ``number`` over its size."""
    places = len(number.split(".")[1]) if "." in number else 0
    size = abs(_num(number))
    return 0.5 * 10**-places / size if size else 0.0


def _whole_after(rest: str, line: str) -> tuple[str | None, str | None]:
    """The whole a share is of, as the sentence names it right after the percent (or, in a
    list, once at its head: ``each with its part of the total change of -2,750: ...``), and
    the part when the sentence states it too (``carries 95.9% of X's change (-117 of -122)``)."""
    for pattern in (
        rf"^ of {NUMBER} moved in either direction",
        rf"^ of [^()%;]*?\bof {NUMBER}",
        rf"^ of [^(%;]*\({NUMBER} of {NUMBER}\)",
    ):
        m = re.match(pattern, rest)
        if m:
            return m.groups()[-1], (m.group(1) if len(m.groups()) == 2 else None)
    if rest.startswith(")"):
        m = re.search(rf"part of (?:[^:]*?\bof {NUMBER}|{NUMBER} moved in either direction)", line)
        if m:
            return next(g for g in m.groups() if g), None
    return None, None


def _beside(line: str, start: int, end: int, stop: int, names: dict[str, Any]) -> list[str]:
    """The segments a percent at ``line[start:end]`` sits beside: the nearest name before it
    (the longest there), and the first after it before ``stop`` (the next percent)."""
    before = [(line.rfind(n, 0, start) + len(n), len(n), n) for n in names]
    after = [(line.find(n, end, stop), -len(n), n) for n in names]
    out = [max(b for b in before if b[0] >= len(b[2]))[2]] if any(
        b[0] >= len(b[2]) for b in before
    ) else []
    later = [a for a in after if a[0] >= 0]
    return out + ([min(later)[2]] if later else [])


def _check_sentence(line: str, names: dict[str, list[dict[str, Any]]]) -> list[str]:
    wrong = []
    found = list(PERCENT.finditer(line))
    for k, m in enumerate(found):
        stop = found[k + 1].start() if k + 1 < len(found) else len(line)
        beside = _beside(line, m.start(), m.end(), stop, names)
        if not beside:
            continue
        said = m.group(1)
        rest = line[m.end():]
        printed, stated = _whole_after(rest, line)
        whole, rounding = (_num(printed), _rounding(printed)) if printed else (None, 0.0)
        segs = [s for name in beside for s in names[name]]
        if re.search(r"\b(together|add to)\b", line[: m.start()].rsplit(";", 1)[-1]):
            # a share of the segments named together: their contributions added up
            found_names = [n for n in names if n in line]
            named = [n for n in found_names if not any(n != o and n in o for o in found_names)]
            segs = [{"contribution": sum(names[n][0]["contribution"] for n in named)}]
        ok = stated is not None and printed is not None and _close(
            said, _num(stated) / _num(printed) * 100, rounding + _rounding(stated)
        )
        for seg in segs:
            if any(_close(said.lstrip("+-"), abs(own)) for own in _own(seg)):
                ok = True
            if any(_close(said, x) for x in _parts_of_own_move(seg)):
                ok = True
            part = seg.get("contribution")
            if whole and isinstance(part, int | float) and _close(
                said, part / whole * 100, rounding
            ):
                ok = True
        if not ok:
            wrong.append(f"{m.group(0)} beside {beside} (whole {whole}): {line.strip()[:300]}")
    return wrong


def _check_table(
    row: list[str], head: str, names: dict[str, list[dict[str, Any]]], result: dict[str, Any]
) -> list[str]:
    name = row[0].split(" (")[0]
    share = next((c for c in row[1:] if c.endswith("%")), None)
    if share is None or name not in names:
        return []
    f = Figures.of(result)
    whole = f.gross if "all movement" in head else f.net
    said = share[:-1]
    for seg in names[name]:
        part = seg.get("contribution")
        if isinstance(part, int | float) and whole and _close(said, part / whole * 100):
            return []
        s = seg.get("share")
        if not f.gross and isinstance(s, int | float) and _close(said, s * 100):
            return []
    return [f"{share} in the {head!r} column beside {name!r}: | {' | '.join(row)} |"]


def misworded(result: dict[str, Any], md: str) -> list[str]:
    """Each percentage beside a segment in ``md`` that is neither its own change nor its share
    of the named whole, with its line."""
    names = _segments(result)
    wrong: list[str] = []
    head = ""
    for line in _words(md):
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set(line) <= set("|-: "):
                continue
            if cells[1] == "before":
                head = next((c for c in cells if c.startswith("share")), "")
                continue
            wrong += _check_table(cells, head, names, result)
        else:
            wrong += _check_sentence(line, names)
    return wrong


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_each_percentage_beside_a_segment_is_its_change_or_its_named_share(
    reports: dict[str, tuple[dict, str]], name: str
) -> None:
    result, md = reports[name]
    assert misworded(result, md) == []


def test_the_check_finds_a_share_worded_as_the_segments_own_change() -> None:
    """The check itself: a segment that fell 96% (50 to 2), its -24.9% part of the total said
    as its fall, is found; its own change and its named share pass."""
    seg = {"segment": {"weather": "rain"}, "baseline": 50.0, "comparison": 2.0,
           "contribution": -48.0, "share": 1.2}  # fmt: skip
    result = {"change": {"absolute": -40.0}, "baseline": {"value": 193.0},
              "comparison": {"value": 153.0}, "root_causes": [seg]}  # fmt: skip
    assert misworded(result, "A -24.9% fall in weather = rain.\n")
    assert misworded(result, "weather = rain: a -24.9% fall.\n")
    assert misworded(result, "weather = rain fell 96.0% (from 50 to 2).\n") == []
    assert misworded(result, "weather = rain: 120.0% of the total change of -40.\n") == []
    assert misworded(result, "weather = rain: 80.3% of the total change of -40.\n")
    assert misworded(result, "weather = rain moved 83.9%.\n")
