"""Tool definitions: pinned by a snapshot, generated from the input models, live enums."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from sql_tools import MAX_SEGMENT_COLUMNS
from tasks.agent.gate import WriteFindingInput
from tasks.agent.hypotheses import ProposedHypothesis
from tasks.engine.spec import Question
from tasks.tools import TOOLS, anthropic_tools

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "snapshots" / "tool_schemas.json"


def test_tool_definitions_match_snapshot():
    """Set UPDATE_SNAPSHOTS=1 to rewrite the snapshot after a deliberate change."""
    current = anthropic_tools()
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(current, indent=2, ensure_ascii=False) + "\n")
    assert current == json.loads(SNAPSHOT.read_text())


def test_names_are_namespaced_and_described():
    names = [t.name for t in TOOLS]
    assert names == [
        "metric_describe",
        "metric_sample",
        "metric_aggregate",
        "metric_compare_periods",
        "metric_explain_change",
    ]
    for t in anthropic_tools():
        assert len(t["description"]) > 80
        assert t["input_schema"]["additionalProperties"] is False


def _keys(node, out):
    if isinstance(node, dict):
        out.update(node.get("properties", {}))
        for v in node.values():
            _keys(v, out)
    elif isinstance(node, list):
        for v in node:
            _keys(v, out)
    return out


def test_no_parameter_accepts_sql_or_code():
    for t in anthropic_tools():
        props = _keys(t["input_schema"], {})
        assert not {"sql", "query", "expression", "code", "where", "raw"} & set(props), t["name"]


def test_live_schema_lists_real_tables_and_columns(ctx):
    tools = {t["name"]: t for t in anthropic_tools(ctx)}
    agg = tools["metric_aggregate"]["input_schema"]
    assert agg["properties"]["table"]["enum"] == ["customers", "sales", "visits"]
    group_items = agg["properties"]["group_by"]["items"]["enum"]
    assert {"region", "customers.tier", "page"} <= set(group_items)
    filter_col = agg["$defs"]["Filter"]["properties"]["column"]["enum"]
    assert filter_col == group_items
    assert "x-live" not in json.dumps(tools)


def _column_limits(text: str) -> set[int]:
    """Every ``up to N ... columns`` and ``at most N columns in a segment`` a text states."""
    pattern = r"up to ([0-9]+) (?:[a-z-]+ ){0,2}columns|at most ([0-9]+) columns in (?:a|one) seg"
    found = re.findall(pattern, " ".join(text.split()), re.I)
    return {int(a or b) for a, b in found}


def test_every_description_states_the_one_segment_column_limit():
    """The tools' descriptions, their group_by/segment/max_depth bounds, the engine's own bound,
    and the README and docs all state the same most columns in one segment."""
    text = json.dumps(anthropic_tools(), ensure_ascii=False)
    stated = _column_limits(text)
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for doc in docs:
        stated |= _column_limits(doc.read_text(encoding="utf-8"))
    assert stated == {MAX_SEGMENT_COLUMNS}
    schemas = {t.name: t.input_model.model_json_schema() for t in TOOLS}
    assert schemas["metric_aggregate"]["properties"]["group_by"]["maxItems"] == MAX_SEGMENT_COLUMNS
    compare = schemas["metric_compare_periods"]["properties"]["group_by"]
    assert compare["maxItems"] == MAX_SEGMENT_COLUMNS
    depth = schemas["metric_explain_change"]["properties"]["max_depth"]["anyOf"][0]
    assert depth["maximum"] == MAX_SEGMENT_COLUMNS
    assert Question.model_json_schema()["properties"]["max_depth"]["anyOf"][0]["maximum"] == (
        MAX_SEGMENT_COLUMNS
    )
    finding = WriteFindingInput.model_json_schema()["properties"]["segment"]
    proposed = ProposedHypothesis.model_json_schema()["properties"]["segment"]
    assert finding["maxProperties"] == proposed["maxProperties"] == MAX_SEGMENT_COLUMNS
