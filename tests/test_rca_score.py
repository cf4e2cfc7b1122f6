"""The root-cause benchmark's scorer (element-level exact match, micro-F1) and its case harness."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import rca
from benchmarks.rca_score import (
    Counts,
    canonical,
    canonical_set,
    case_counts,
    f1_score,
    grouped_scores,
    micro_scores,
)

# --------------------------------------------------------------------------------------------
# scorer


def test_exact_match():
    assert case_counts([{"a": "a1"}], [{"a": "a1"}]) == Counts(1, 0, 0)
    pred = [{"b": "b2", "a": "a1"}, {"c": "c3"}]
    true = [{"c": "c3"}, {"a": "a1", "b": "b2"}]
    assert case_counts(pred, true) == Counts(2, 0, 0)
    assert case_counts(pred, true).exact


def test_ancestor_is_one_false_positive_and_one_false_negative():
    assert case_counts([{"a": "a1"}], [{"a": "a1", "b": "b1"}]) == Counts(0, 1, 1)


def test_descendant_is_one_false_positive_and_one_false_negative():
    assert case_counts([{"a": "a1", "b": "b1"}], [{"a": "a1"}]) == Counts(0, 1, 1)


def test_same_values_in_other_dimensions_do_not_match():
    assert case_counts([{"a": "x"}], [{"b": "x"}]) == Counts(0, 1, 1)


def test_duplicates_are_counted_once():
    pred = [{"a": "a1"}, {"a": "a1"}, {"a": "a1"}]
    assert case_counts(pred, [{"a": "a1"}, {"b": "b2"}]) == Counts(1, 0, 1)
    assert case_counts([{"a": "a1"}], [{"a": "a1"}, {"a": "a1"}]) == Counts(1, 0, 0)


def test_empty_prediction_is_all_false_negatives():
    assert case_counts([], [{"a": "a1"}, {"b": "b2"}]) == Counts(0, 0, 2)
    assert case_counts(None, [{"a": "a1"}]) == Counts(0, 0, 1)


def test_values_compare_as_text():
    assert case_counts([{"bitrate": 2000}], [{"bitrate": "2000"}]) == Counts(1, 0, 0)
    assert case_counts([{"bitrate": 2000.0}], [{"bitrate": "2000"}]) == Counts(1, 0, 0)
    assert case_counts([{"cdn": 5, "p2p": 0}], [{"p2p": "0", "cdn": "5"}]) == Counts(1, 0, 0)
    assert case_counts([{"v": 5.2}], [{"v": "5.2"}]) == Counts(1, 0, 0)
    assert case_counts([{"v": 2001}], [{"v": "2000"}]) == Counts(0, 1, 1)


def test_label_text_syntax():
    assert canonical("b=2&a=a1") == frozenset({("a", "a1"), ("b", "2")})
    assert canonical_set("a=a1&b=b2;c=c3") == {
        frozenset({("a", "a1"), ("b", "b2")}),
        frozenset({("c", "c3")}),
    }
    assert case_counts(["b=2&a=a1"], [{"a": "a1", "b": 2}]) == Counts(1, 0, 0)


def test_f1_edge_cases():
    assert f1_score(0, 0, 0) == 1.0
    assert f1_score(0, 3, 0) == 0.0
    assert f1_score(1, 1, 1) == pytest.approx(0.5)


def test_micro_f1_sums_counts_over_cases():
    cases = [
        ([{"a": "a1"}], [{"a": "a1"}]),  # 1 0 0
        ([], [{"b": "b1"}, {"c": "c1"}]),  # 0 0 2
        ([{"d": "d1"}, {"e": "e1"}], [{"d": "d1", "e": "e1"}]),  # 0 2 1
    ]
    s = micro_scores(cases)
    assert (s["tp"], s["fp"], s["fn"], s["n_cases"]) == (1, 2, 3, 3)
    assert s["f1"] == pytest.approx(2 / (2 + 2 + 3))
    assert s["precision"] == pytest.approx(1 / 3)
    assert s["recall"] == pytest.approx(1 / 4)
    # micro-F1 is not the mean of per-case F1
    assert s["mean_case_f1"] == pytest.approx(1 / 3)
    assert s["exact_set_accuracy"] == pytest.approx(1 / 3)


def test_grouped_scores_per_dataset_and_overall():
    out = grouped_scores(
        [
            ("B0", [{"a": "a1"}], [{"a": "a1"}]),
            ("RS", [{"bitrate": 500}], [{"bitrate": "2000"}]),
            ("RS", [{"bitrate": 2000}], [{"bitrate": "2000"}]),
        ]
    )
    assert out["B0"]["f1"] == 1.0
    assert (out["RS"]["tp"], out["RS"]["fp"], out["RS"]["fn"]) == (1, 1, 1)
    assert (out["all"]["tp"], out["all"]["fp"], out["all"]["fn"]) == (2, 1, 1)
    assert out["all"]["f1"] == pytest.approx(4 / 6)


# --------------------------------------------------------------------------------------------
# harness


def test_metric_columns():
    assert rca.metric_columns({"type": "sum", "column": "value"}) == ("value", None)
    ratio = {"type": "ratio", "numerator": "stalled", "denominator": "viewers"}
    assert rca.metric_columns(ratio) == ("stalled", "viewers")
    assert rca.metric_columns({"formula": "sum(stalled) / sum(viewers)"}) == ("stalled", "viewers")
    with pytest.raises(ValueError):
        rca.metric_columns({"formula": "avg(value)"})


def _write_case(folder: Path, case_id: str, truth: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["cdn,bitrate,period,stalled,viewers"]
    for cdn in ("3", "5"):
        for bitrate in ("500", "2000"):
            bad = cdn == "5" and bitrate == "2000"
            rows.append(f"{cdn},{bitrate},baseline,1,100")
            rows.append(f"{cdn},{bitrate},comparison,{30 if bad else 1},100")
    (folder / f"{case_id}.csv").write_text("\n".join(rows) + "\n")
    meta = {
        "case_id": case_id,
        "dataset": folder.name,
        "group": folder.name,
        "dimensions": ["cdn", "bitrate"],
        "metric": {
            "type": "ratio",
            "numerator": "stalled",
            "denominator": "viewers",
            "formula": "sum(stalled)/sum(viewers)",
        },
        "root_causes": truth,
    }
    (folder / f"{case_id}.json").write_text(json.dumps(meta))


def test_harness_loads_asks_and_scores_a_case(tmp_path):
    data = tmp_path / "data"
    _write_case(data / "RS", "RS__one", [{"cdn": "5", "bitrate": "2000"}])
    (data / "RS" / "index.json").write_text(json.dumps({"dataset": "RS", "cases": []}))
    cases = rca.discover(data)
    assert [c.case_id for c in cases] == ["RS__one"]

    seen = {}

    def predict(db, question):
        seen["question"] = question
        seen["db_exists"] = Path(db).is_file()
        return SimpleNamespace(
            root_causes=[SimpleNamespace(segment={"cdn": 5, "bitrate": 2000}), {"segment": {}}]
        )

    work = tmp_path / "work"
    work.mkdir()
    rec = rca.run_case(cases[0], predict, max_depth=1, workdir=work)
    assert rec["error"] is None, rec.get("traceback")
    assert seen["db_exists"]
    q = seen["question"]
    assert q.metric.expression == "sum(stalled) / sum(viewers)"
    assert q.metric.table == rca.TABLE
    assert q.periods.period_column == "period"
    assert (q.periods.baseline, q.periods.comparison) == ("baseline", "comparison")
    assert q.dimensions == ("cdn", "bitrate")
    assert q.max_depth == 1 and q.min_support == 0.0
    assert rec["rows"] == 8
    # {cdn: 5, bitrate: 2000} matches the text labels; {} is one false positive
    assert (rec["tp"], rec["fp"], rec["fn"]) == (1, 1, 0)

    summary = rca.summarize([rec])
    assert summary["by_dataset"]["RS"]["f1"] == pytest.approx(2 / 3)
    assert "| RS | 1 | 1 | 1 | 0 |" in rca.markdown_table(summary)


def test_harness_records_a_crash_as_an_empty_prediction(tmp_path):
    _write_case(tmp_path / "data" / "B0", "B0__x", [{"cdn": "5"}])
    (case,) = rca.discover(tmp_path / "data")

    def predict(db, question):
        raise RuntimeError("engine broke")

    work = tmp_path / "work"
    work.mkdir()
    rec = rca.run_case(case, predict, max_depth=None, workdir=work)
    assert rec["error"] == "explain: RuntimeError: engine broke"
    assert rec["predicted"] == [] and (rec["tp"], rec["fp"], rec["fn"]) == (0, 0, 1)
    assert rec["seconds_load"] is not None and rec["seconds_explain"] is None
    assert "B0__x" in rca.misses([rec])


def test_error_kinds_name_why_predictions_missed():
    recs = [
        {
            "dimensions": ["a", "b", "c"],
            "truth": [{"a": "a1"}, {"b": "b1", "c": "c1"}, {"c": "c9"}],
            "predicted": [
                {"a": "a1", "b": "b2"},  # too specific: descendant of a=a1
                {"b": "b1"},  # too general: ancestor of b=b1&c=c1
                {"a": "a3", "b": "b3", "c": "c3"},  # an unrelated leaf
                {"a": "a4"},  # unrelated
            ],
        },
        {"dimensions": ["a"], "truth": [{"a": "a1"}], "predicted": []},
    ]
    assert rca.error_kinds(recs) == {
        "cases_empty_prediction": 1,
        "fn_ancestor_predicted": 1,
        "fn_descendant_predicted": 1,
        "fn_missed": 2,
        "fp_ancestor": 1,
        "fp_descendant": 1,
        "fp_unrelated": 1,
        "fp_unrelated_leaf": 1,
    }
