"""Investigations used across the store tests: a revenue drop on iOS 5.2, a signup drop
in Germany and a DAU drop on Android, with hypotheses, an evidence ledger and findings.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from tasks.store import InvestigationRecord

TABLES = ("investigations", "hypotheses", "evidence", "findings", "reports", "memory_documents")


def ios_revenue_drop(**changes: Any) -> InvestigationRecord:
    data: dict[str, Any] = {
        "run_id": "run-ios-revenue",
        "created_at": datetime(2024, 3, 31, 9, 0, tzinfo=UTC),
        "data_fingerprint": {"events": "a" * 64, "users": "b" * 64},
        "metric": "sum(revenue)",
        "metric_name": "revenue",
        "table": "events",
        "baseline": "2024-03-18..2024-03-24",
        "comparison": "2024-03-25..2024-03-31",
        "question": {"metric": "sum(revenue)", "dimensions": ["platform", "app_version"]},
        "result": {
            "change": {"absolute": -2150.0, "relative": -0.215, "significant": True},
            "root_causes": [
                {"segment": {"platform": "ios", "app_version": "5.2"}, "contribution": -1720.0,
                 "share": 0.8, "effect": "rate", "p_value": 1e-9},
            ],
            "hypotheses": [], "findings": [],
        },
        "hypotheses": [
            {"id": "h1", "title": "The iOS 5.2 app release broke checkout",
             "story": "Revenue per iOS 5.2 user collapsed after the release.",
             "status": "confirmed", "confidence": 0.9},
            {"id": "h2", "title": "Android pricing change", "story": "A price change on Android.",
             "status": "ruled_out", "confidence": 0.7, "notes": {"checked": ["price"]}},
        ],
        "evidence": [
            {"hypothesis_id": "h1", "seq": 1, "tool": "metric_compare_periods",
             "arguments": {"group_by": ["platform", "app_version"]},
             "sql": "select platform, app_version, sum(revenue) from events group by all",
             "params": ["2024-03-18", "2024-03-24"], "digest": "d" * 16,
             "elapsed_ms": 12.5, "tokens": 310},
            {"hypothesis_id": "h2", "seq": 2, "tool": "metric_aggregate",
             "arguments": {"filters": [{"column": "platform", "op": "=", "value": "android"}]},
             "sql": "select sum(revenue) from events where platform = ?", "params": ["android"],
             "digest": "e" * 16, "elapsed_ms": 4.0, "tokens": 120},
        ],
        "findings": [
            {"key": "platform=ios,app_version=5.2|rate", "segment": {"platform": "ios",
             "app_version": "5.2"}, "category": "rate", "status": "accepted",
             "claim": {"delta": -1720.0}, "critique": None, "hypothesis_id": "h1"},
            {"key": "platform=android|mix", "segment": {"platform": "android"}, "category": "mix",
             "status": "dismissed", "claim": {"delta": -80.0},
             "critique": "inside the noise (p=0.4)", "hypothesis_id": "h2"},
        ],
        "report_md": "# Why revenue fell\n\nRevenue fell 21.5% week over week because the iOS app "
        "release 5.2 broke checkout: iOS 5.2 explains 80% of the drop.\n\n| segment | share |\n",
    }  # fmt: skip
    data.update(changes)
    return InvestigationRecord(**data)


def de_signup_drop(**changes: Any) -> InvestigationRecord:
    data: dict[str, Any] = {
        "run_id": "run-de-signups",
        "created_at": datetime(2024, 4, 7, 9, 0, tzinfo=UTC),
        "data_fingerprint": {"signups": "c" * 64},
        "metric": "count(*)",
        "metric_name": "signups",
        "table": "signups",
        "baseline": "2024-03-25..2024-03-31",
        "comparison": "2024-04-01..2024-04-07",
        "question": {"metric": "count(*)"},
        "result": {
            "change": {"absolute": -400, "relative": -0.12, "significant": True},
            "root_causes": [
                {"segment": {"country": "DE"}, "contribution": -380, "share": 0.95,
                 "effect": "rate", "p_value": 1e-6},
            ],
        },
        "hypotheses": [
            {"id": "h1", "title": "German signup form broken by the cookie banner",
             "story": "Signups from Germany dropped after the consent banner update.",
             "status": "confirmed", "confidence": 0.8},
        ],
        "evidence": [],
        "findings": [
            {"key": "country=DE|rate", "segment": {"country": "DE"}, "category": "rate",
             "status": "accepted", "claim": {"delta": -380}, "critique": None,
             "hypothesis_id": "h1"},
        ],
        "report_md": "# Signups in Germany\n\nSignups fell 12% because registrations from Germany "
        "(DE) dropped after the cookie consent banner update.",
    }  # fmt: skip
    data.update(changes)
    return InvestigationRecord(**data)


def android_dau_drop(**changes: Any) -> InvestigationRecord:
    data: dict[str, Any] = {
        "run_id": "run-android-dau",
        "created_at": datetime(2024, 4, 14, 9, 0, tzinfo=UTC),
        "metric": "count(distinct user_id)",
        "metric_name": "dau",
        "table": "sessions",
        "baseline": "2024-04-01..2024-04-07",
        "comparison": "2024-04-08..2024-04-14",
        "result": {
            "change": {"relative": -0.08, "significant": True},
            "root_causes": [
                {"segment": {"platform": "android", "device": "samsung"}, "contribution": -900,
                 "share": 0.9, "effect": "rate", "p_value": 1e-5},
            ],
        },
        "hypotheses": [
            {"id": "h1", "title": "Startup crash on Samsung phones", "status": "confirmed",
             "confidence": 0.85},
        ],
        "report_md": "# DAU\n\nDaily active users fell 8% because the Android app crashed on "
        "startup on Samsung devices.",
    }  # fmt: skip
    data.update(changes)
    return InvestigationRecord(**data)


def store_text(path: Path) -> str:
    """Every value of every table of a local memory store, as text: what a search of the store
    for a string finds (the file's own bytes may hold text compressed)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        names = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE'"
        ).fetchall()
        rows = [con.execute(f'SELECT * FROM "{s}"."{t}"').fetchall() for s, t in names]
    finally:
        con.close()
    assert any(rows), "the store holds nothing"
    return repr(rows)
