"""The store contract, run on both backends: embedded DuckDB and real Postgres + pgvector."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

import tasks.store.base as store_base
from tasks.store import RecordRejected, StoreError, memory_text
from tasks.store.base import memory_document
from tasks.store.history import format_history, similar_investigations
from tasks.store.models import DataIdentity
from tests.support.records import TABLES, android_dau_drop, de_signup_drop, ios_revenue_drop

ONE_EACH = dict.fromkeys(TABLES, 1)


def full_counts(rec) -> dict[str, int]:
    return {
        "investigations": 1,
        "hypotheses": len(rec.hypotheses),
        "evidence": len(rec.evidence),
        "findings": len(rec.findings),
        "reports": 1,
        "memory_documents": 1,
    }


def test_a_saved_investigation_comes_back_whole(store):
    rec = ios_revenue_drop()
    assert store.save_investigation(rec) == "run-ios-revenue"
    got = store.get_investigation("run-ios-revenue")
    assert got == rec
    assert list(got.result["root_causes"][0]["segment"]) == [
        "platform",
        "app_version",
    ]  # order kept
    assert store.get_investigation("no-such-run") is None
    [summary] = store.list_investigations()
    assert summary.run_id == rec.run_id and summary.metric == "sum(revenue)"
    assert summary.root_causes[0]["segment"] == {"platform": "ios", "app_version": "5.2"}


def test_free_form_values_are_kept_as_given(store):
    rec = ios_revenue_drop(
        hypotheses=[{"id": 7, "title": "t", "status": "inconclusive", "confidence": "high",
                     "extra": {"nested": [1, {"deep": None}]}}],
        evidence=[{"hypothesis_id": 7, "seq": "first", "tool": "metric_sample",
                   "tokens": {"input": 1200, "output": 80}, "elapsed_ms": None, "rows": [[1, "a"]]}],
        findings=[{"segment": {"users.plan": "pro"}, "status": "dismissed", "claim": [1, 2]}],
    )  # fmt: skip
    store.save_investigation(rec)
    assert store.get_investigation(rec.run_id) == rec
    [dismissed] = store.dismissed_findings("sum(revenue)", data=rec.data_identity)
    assert dismissed["segment"] == {"users.plan": "pro"} and dismissed["claim"] == [1, 2]


def test_saving_the_same_record_twice_stores_it_once(store, backend):
    rec = ios_revenue_drop()
    store.save_investigation(rec)
    store.save_investigation(ios_revenue_drop())  # equal content, a new object
    assert backend.counts() == full_counts(rec)
    doc = memory_document(rec, store.embedder)
    assert store.write(rec, doc) is False  # recognised as already stored: nothing written
    reopened = backend.open()
    reopened.save_investigation(rec)
    assert backend.counts() == full_counts(rec)


def test_a_changed_record_replaces_the_stored_one_whole(store, backend):
    store.save_investigation(ios_revenue_drop())
    changed = ios_revenue_drop(
        hypotheses=[{"id": "h9", "title": "Payment provider outage", "status": "inconclusive"}],
        evidence=[],
        findings=[],
        report_md="# Revised\n\nRevenue fell because of a payment provider outage.",
    )
    store.save_investigation(changed)
    assert store.get_investigation(changed.run_id) == changed
    assert backend.counts() == {**ONE_EACH, "evidence": 0, "findings": 0}
    [hit] = store.search_similar("payment provider outage", k=5)
    assert hit.run_id == changed.run_id  # one memory document, the new one


def test_a_value_the_database_rejects_stores_nothing(store, backend):
    bad_status = ios_revenue_drop(
        findings=[{"key": "k", "segment": {}, "category": "rate", "status": "maybe"}]
    )
    with pytest.raises(RecordRejected, match="run-ios-revenue") as ei:
        store.save_investigation(bad_status)
    assert "\n" not in str(ei.value)
    assert store.get_investigation("run-ios-revenue") is None
    assert backend.counts() == dict.fromkeys(TABLES, 0)

    original = ios_revenue_drop()
    store.save_investigation(original)
    duplicate_keys = ios_revenue_drop(
        report_md="# changed",
        findings=[
            {"key": "same", "segment": {"a": 1}, "status": "accepted"},
            {"key": "same", "segment": {"b": 2}, "status": "dismissed"},
        ],
    )
    with pytest.raises(RecordRejected):
        store.save_investigation(duplicate_keys)
    assert store.get_investigation(original.run_id) == original  # the old version, intact
    assert backend.counts() == full_counts(original)


def test_a_failure_mid_write_leaves_the_previous_version(store, backend, monkeypatch):
    original = ios_revenue_drop()
    store.save_investigation(original)

    def fail_late(step: str) -> None:
        if step in ("findings", "written"):  # DuckDB's steps / Postgres's single call
            raise OSError("disk went away")

    monkeypatch.setattr(store_base, "_after_write_step", fail_late)
    failed = (OSError, StoreError)  # the DuckDB store names its file in a StoreError
    with pytest.raises(failed, match="disk went away"):
        store.save_investigation(ios_revenue_drop(report_md="# v2", evidence=[]))
    with pytest.raises(failed):
        store.save_investigation(de_signup_drop())
    monkeypatch.undo()
    assert store.get_investigation(original.run_id) == original
    assert store.get_investigation("run-de-signups") is None
    assert backend.counts() == full_counts(original)
    store.save_investigation(de_signup_drop())  # the store still works afterwards
    assert store.get_investigation("run-de-signups") == de_signup_drop()


def test_similar_search_finds_the_matching_past_investigation(store):
    for rec in (de_signup_drop(), ios_revenue_drop(), android_dau_drop()):
        store.save_investigation(rec)
    hits = store.search_similar("ios app release revenue fell", k=3)
    assert [h.run_id for h in hits][0] == "run-ios-revenue"
    assert hits[0].score > hits[1].score
    assert hits[0].embedding_model == store.embedder.model
    assert store.search_similar("german signups dropped", k=1)[0].run_id == "run-de-signups"
    only = store.search_similar("revenue fell", k=5, metric="count(*)")
    assert [h.run_id for h in only] == ["run-de-signups"]
    assert len(store.search_similar("anything", k=2)) == 2


def test_search_is_restricted_to_one_embedding_model(store):
    rec = ios_revenue_drop()
    store.save_investigation(rec)
    stored = memory_document(rec, store.embedder)["embedding"]
    assert store.search_similar(np.array(stored), k=3)[0].score == pytest.approx(1.0, abs=1e-5)
    assert store.search_similar(np.array(stored), k=3, model="voyage/voyage-4-lite-256") == []
    with pytest.raises(StoreError, match="configured embedder"):
        store.search_similar("revenue", model="voyage/voyage-4-lite-256")


def test_dismissed_findings_are_remembered_per_metric(store):
    store.save_investigation(ios_revenue_drop())
    later = ios_revenue_drop(
        run_id="run-ios-revenue-2",
        created_at=datetime(2024, 4, 21, tzinfo=UTC),
        findings=[
            {"key": "platform=android|mix", "segment": {"platform": "android"}, "category": "mix",
             "status": "dismissed", "critique": "again inside the noise"},
            {"key": "country=US|rate", "segment": {"country": "US"}, "category": "rate",
             "status": "dismissed", "critique": "data quality: missing days"},
        ],
    )  # fmt: skip
    store.save_investigation(later)
    store.save_investigation(de_signup_drop())
    data = later.data_identity
    found = store.dismissed_findings("sum(revenue)", data=data)
    # newest first, one per (segment, category), accepted findings left out
    assert [(f["segment"], f["run_id"]) for f in found] == [
        ({"platform": "android"}, "run-ios-revenue-2"),
        ({"country": "US"}, "run-ios-revenue-2"),
    ]
    assert found[0]["critique"] == "again inside the noise"
    assert store.dismissed_findings("revenue", data=data) == found  # by metric name too
    narrowed = store.dismissed_findings("sum(revenue)", segments=[{"country": "US"}], data=data)
    assert [f["key"] for f in narrowed] == ["country=US|rate"]
    assert store.dismissed_findings("count(*)", data=data) == []


def test_dismissed_findings_of_other_data_suppress_nothing(store):
    android = {
        "key": "platform=android|mix",
        "segment": {"platform": "android"},
        "category": "mix",
        "status": "dismissed",
        "critique": "inside the noise",
    }
    plan = {"key": "users.plan=pro|rate", "segment": {"users.plan": "pro"}, "category": "rate",
            "status": "dismissed", "critique": "too small"}  # fmt: skip
    shop_a = ios_revenue_drop(findings=[android, plan], data_source="shop-a")
    shop_b = ios_revenue_drop(
        run_id="run-shop-b",
        data_fingerprint={"events": "f" * 64},  # another dataset: the same table names
        findings=[{**android, "segment": {"country": "US"}, "key": "country=US|rate"}],
    )
    for rec in (shop_a, shop_b):
        store.save_investigation(rec)

    def dismissed(**identity) -> list[str]:
        data = DataIdentity(**{"table": "events", **identity})
        return [f["key"] for f in store.dismissed_findings("sum(revenue)", data=data)]

    assert dismissed(fingerprint=shop_a.data_fingerprint) == [android["key"], plan["key"]]
    assert dismissed(fingerprint=shop_b.data_fingerprint) == ["country=US|rate"]
    # the same events, other users: a finding about a users column no longer holds
    assert dismissed(fingerprint={"events": "a" * 64, "users": "9" * 64}) == [android["key"]]
    # new rows of a named source: its memory applies; of a source not named: nothing does
    assert dismissed(fingerprint={"events": "7" * 64}, source="shop-a") == [
        android["key"], plan["key"]]  # fmt: skip
    assert dismissed(fingerprint={"events": "7" * 64}) == []
    assert dismissed(fingerprint={"events": "7" * 64}, source="shop-b") == []
    # the same metric on another table of the same data is another metric
    assert dismissed(table="orders", fingerprint={**shop_a.data_fingerprint, "orders": "a"}) == []


def test_similar_investigations_say_which_data_they_read(store):
    here = ios_revenue_drop(data_source="shop-a")
    there = ios_revenue_drop(run_id="run-shop-b", data_fingerprint={"events": "f" * 64})
    for rec in (here, there):
        store.save_investigation(rec)
    hits = {h.run_id: h for h in store.search_similar("ios revenue fell", k=5)}
    assert hits[here.run_id].data_identity == here.data_identity
    assert hits[there.run_id].data_identity == there.data_identity
    rows = similar_investigations(store, "ios revenue fell", data=here.data_identity)
    assert {r.run_id: r.same_data for r in rows} == {here.run_id: True, there.run_id: False}
    assert {r.same_data for r in similar_investigations(store, "ios revenue fell")} == {None}


def test_list_is_newest_first_and_limited(store):
    for rec in (de_signup_drop(), ios_revenue_drop(), android_dau_drop()):
        store.save_investigation(rec)
    assert [s.run_id for s in store.list_investigations(limit=2)] == [
        "run-android-dau",
        "run-de-signups",
    ]
    with pytest.raises(StoreError, match="limit must be"):
        store.list_investigations(limit=0)
    with pytest.raises(StoreError, match="search text is empty"):
        store.search_similar("  ")


def test_memory_text_names_metric_periods_causes_verdicts_and_summary():
    text = memory_text(ios_revenue_drop())
    assert "revenue (sum(revenue))" in text
    assert "2024-03-18..2024-03-24" in text and "2024-03-25..2024-03-31" in text
    assert "platform=ios, app_version=5.2" in text and "fell 21.5%" in text
    assert "The iOS 5.2 app release broke checkout: confirmed" in text
    assert "Android pricing change: ruled_out" in text
    assert "broke checkout: iOS 5.2 explains 80% of the drop." in text
    assert "| segment" not in text and "Why revenue fell" not in text


def test_history_lines_name_score_date_metric_causes_and_run(store):
    assert format_history(similar_investigations(store, "anything")) == (
        "No similar past investigations."
    )
    for rec in (ios_revenue_drop(), de_signup_drop(), android_dau_drop()):
        store.save_investigation(rec)
    rows = similar_investigations(store, "ios app release revenue fell", k=2)
    assert [r.run_id for r in rows] == ["run-ios-revenue", "run-android-dau"]
    assert rows[0].root_causes == ["platform=ios, app_version=5.2"]
    lines = format_history(rows).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{rows[0].score:.2f}  2024-03-31  revenue (sum(revenue))")
    assert "platform=ios, app_version=5.2" in lines[0] and lines[0].endswith(
        "(run run-ios-revenue)"
    )
    assert "platform=android, device=samsung" in lines[1]


def test_a_store_file_of_the_first_schema_is_upgraded_keeping_what_it_holds(tmp_path, embedder):
    from tasks.store import DuckDBStore

    path = tmp_path / "store.duckdb"
    old = ios_revenue_drop()
    with DuckDBStore(path, embedder=embedder) as store:
        store.save_investigation(old)
        store.save_investigation(de_signup_drop())
        con = store._cx()  # what a file written before sources were named looks like
        con.execute("alter table investigations drop column data_source")
        con.execute("update store_meta set value = '1' where key = 'schema_version'")

    with DuckDBStore(path, embedder=embedder) as store:
        assert store.get_investigation(old.run_id) == old
        assert store.table_counts()["investigations"] == 2
        [hit, _] = store.search_similar("ios revenue fell", k=2)
        assert hit.run_id == old.run_id and hit.data_identity == old.data_identity
        [dismissed] = store.dismissed_findings("sum(revenue)", data=old.data_identity)
        assert dismissed["run_id"] == old.run_id
        named = ios_revenue_drop(run_id="run-named", data_source="shop")
        store.save_investigation(named)
        assert store.get_investigation("run-named") == named
    with DuckDBStore(path, embedder=embedder) as store:  # opening again changes nothing
        assert store.get_investigation("run-named") == named
        assert store._cx().execute("select value from store_meta").fetchall() == [("2",)]
