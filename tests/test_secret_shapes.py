"""A key in any shape the data can carry it (a value, a column name, a file name and the table
named after it, the name of the data's source; percent-encoded once or twice, every byte
escaped, base64 and base64url) is masked in every file an investigation writes and in the
memory store: a real offline investigation by the CLI, every byte of every output file, the
store file's bytes and every value in it.

``data.duckdb`` is left out: it is the user's own data, loaded, and holds their values and
names as they are (the product reads it to answer the question).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.cli import drilldown
from tests.support.records import store_text
from tests.test_hostile_values import WEEKS, weeks_csv
from tests.test_secret_values import MASK, STRIPE

pytestmark = pytest.mark.slow

TAIL = STRIPE[8:]  # the secret part: what no output may hold


def _b64(text: str, alphabet=base64.b64encode) -> str:
    return alphabet(text.encode()).decode()


VALUES = {  # a product value holding the key -> more text it must not leave either
    "as it is": STRIPE,
    "percent-encoded": f"cb?key%3D{STRIPE}",
    "percent-encoded twice": quote(quote(f"key={STRIPE}", safe=""), safe=""),
    "every byte escaped": "".join(f"%{ord(ch):02X}" for ch in STRIPE),
    "base64": _b64(f"token={STRIPE}"),
    "base64url": _b64(f"?>{STRIPE}>>", base64.urlsafe_b64encode),
}
NAMES = ("column", "file", "source")  # where a name holds the key: --source names the data


def _investigate(
    tmp_path: Path, csv: Path, column: str = "product", *args: str
) -> tuple[str, Path]:
    """``csv`` investigated offline into ``tmp_path/out``, remembered in a store of its own;
    (the console's text, the output folder)."""
    out = tmp_path / "out"
    proc = drilldown(
        "investigate", str(csv), "--metric", "sum(revenue)", "--time-column", "day",
        "--baseline", WEEKS[0], "--comparison", WEEKS[1], "--offline", "--out", str(out),
        "--dimensions", column, *args,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr, out


def _leaks(tmp_path: Path, out: Path, console: str, forbidden: list[str]) -> dict[str, list[str]]:
    """Where each forbidden text is found: every file in ``out`` but the loaded data, the
    store's bytes and values, the console."""
    files = [p for p in out.rglob("*") if p.is_file() and not p.name.startswith("data.duckdb")]
    assert {"report.md", "report.html", "result.json", "evidence.jsonl"} <= {p.name for p in files}
    assert any(p.parent.name == "hypotheses" for p in files)
    store = tmp_path / "memory.duckdb"
    texts = {str(p.relative_to(out)): p.read_bytes() for p in files}
    texts |= {"store file": store.read_bytes(), "store values": store_text(store).encode()}
    texts["console"] = console.encode()
    found: dict[str, list[str]] = {}
    for where, data in texts.items():
        hits = [f for f in forbidden if f.encode() in data or f.lower().encode() in data]
        if hits:
            found[where] = hits
    return found


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("DRILLDOWN_STORE_PATH", str(tmp_path / "memory.duckdb"))


@pytest.mark.parametrize("shape", VALUES)
def test_a_key_in_a_value_leaves_no_byte_in_any_output(tmp_path, shape):
    value = VALUES[shape]
    csv = tmp_path / "sales.csv"
    csv.write_text(weeks_csv("product", ["Widget", value, "Gizmo"], [value]), encoding="utf-8")
    console, out = _investigate(tmp_path, csv)
    assert MASK in (out / "result.json").read_text(encoding="utf-8")
    middle = value[len(value) // 2 :][:16]  # encodes part of the secret in every shape
    assert _leaks(tmp_path, out, console, [STRIPE, TAIL, value, middle]) == {}


@pytest.mark.parametrize("where", NAMES)
def test_a_key_in_a_name_leaves_no_byte_in_any_output(tmp_path, where):
    """The loader folds a column's and a table's name to lower case: neither form may leave."""
    csv = tmp_path / (f"{STRIPE}.csv" if where == "file" else "sales.csv")
    column = STRIPE if where == "column" else "product"
    products = ["Widget", "Gadget", "Gizmo"]
    csv.write_text(weeks_csv(column, products, ["Gadget"]), encoding="utf-8")
    source = f"https://files.test/export?token%3D{STRIPE}"
    source = ["--source", source] if where == "source" else []
    console, out = _investigate(tmp_path, csv, column.lower(), *source)
    shown = console + (out / "result.json").read_text(encoding="utf-8")
    assert "sk_live_" + MASK in shown + store_text(tmp_path / "memory.duckdb")
    assert _leaks(tmp_path, out, console, [STRIPE, TAIL]) == {}


def test_memory_of_data_with_a_key_in_its_name_still_counts(tmp_path):
    """The store keeps the table's name masked; another question on the same data finds its
    memory by that masked name: same data, and a dismissed finding stays dismissed."""
    demo = Path(__file__).resolve().parents[1] / "data" / "demo" / "events.csv"
    csv = tmp_path / f"{STRIPE}.csv"
    csv.write_bytes(demo.read_bytes())
    question = [
        "--metric", "sum(revenue)", "--time-column", "date", "--baseline",
        "2024-03-18:2024-03-24", "--comparison", "2024-03-25:2024-03-31", "--offline",
    ]  # fmt: skip
    results = []
    for out, more in ((tmp_path / "first", []), (tmp_path / "second", ["--min-support", "0.02"])):
        proc = drilldown("investigate", str(csv), *question, *more, "--out", str(out))
        assert proc.returncode == 0, proc.stderr[-3000:]
        results.append(json.loads((out / "result.json").read_text(encoding="utf-8")))
    first, second = results
    dismissed = [f["segment"] for f in first["findings"] if f["status"] == "dismissed"]
    assert dismissed, "the first investigation dismissed a driver"
    assert [p["same_data"] for p in second["similar_investigations"]] == [True]
    assert not [h for h in second["hypotheses"] if h["segment"] in dismissed]
    text = (tmp_path / "second" / "result.json").read_text(encoding="utf-8")
    assert TAIL.lower() not in text and "sk_live_" + MASK in text
