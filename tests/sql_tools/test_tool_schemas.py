"""Tool definitions: pinned by a snapshot, generated from the input models, live enums."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tasks.tools import TOOLS, anthropic_tools

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "tool_schemas.json"


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
