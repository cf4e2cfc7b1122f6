"""Secret-shaped values (API keys, tokens, private keys) that a data file happens to hold are
masked wherever the product writes them: the reports, result.json, the evidence files, the
memory store, what the model reads and the console. The first characters stay, so a reader
still knows what kind of value it was; the data itself is untouched.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote, unquote

import pytest

from sql_tools.output import (
    dumps,
    mask_secrets,
    masked,
    printable,
    printable_line,
    secrets_note,
)
from tests.agent.test_agent_cli import investigate_with_model, reply
from tests.support.records import store_text
from tests.test_hostile_values import WEEKS, weeks_csv

STRIPE = "sk_live_51Hq8ZkLmN3pQrStUvWxYz0123456789AbCd"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq98\n-----END RSA PRIVATE KEY-----"
SECRETS = {  # a value of each well-known format -> what is left of it
    STRIPE: "sk_live_",
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc": "sk_test_",
    "rk_live_51Hq8ZkLmN3pQrStUvWxYz01": "rk_live_",
    JWT: "eyJ",
    "AKIAIOSFODNN7EXAMPLE": "AKIA",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a": "ghp_",
    "github_pat_11ABCDEFG0abcdefghij_KLMNOPQRSTUVWXYZ0123456789": "github_pat_",
    "xoxb-2048-4096-AbCdEfGhIjKlMnOp": "xoxb-",
    "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe": "AIza",
    PEM: "-----BEGIN RSA PRIVATE KEY-----",
    "sk-proj-T3BlbkFJ9aXz8Qw7Er6Ty5Ui4Op3As2Df": "sk-",
    "sk-ant-api03-Zm9vYmFyYmF6cXV4cXV1eA-AAAA": "sk-ant-",
}
ORDINARY = [
    "sk_live_",
    "risk_live_events_2024_summary",
    "task-123456789012345678901234567890",
    "eyJ",
    "AKIA",
    "Gadget",
    "ghp_short",
    "xoxb-1",
    "-----BEGIN PUBLIC KEY-----",
    "ops@example.com",
    "3f2b8c1e-9d4a-4b7e-8f6a-2c1d0e9b7a65",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
]
MASK = "••••"


@pytest.mark.parametrize("secret", SECRETS)
def test_each_format_keeps_its_first_characters_and_masks_the_rest(secret):
    kept = SECRETS[secret]
    assert mask_secrets(f"key {secret} here") == f"key {kept}{MASK} here"
    shown = [printable(secret), printable_line(secret, 80), dumps({"v": [secret]})]
    assert all(secret not in text and kept + MASK in text for text in shown)


def test_a_secret_is_masked_before_a_line_is_cut():
    """Cut first, a JWT would lose the parts that make it recognisable and show its start."""
    assert printable_line(f"token {JWT}", 60) == "token eyJ" + MASK


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_are_left_alone(value):
    assert mask_secrets(value) == value
    assert dumps(value) == json.dumps(value)


def test_the_note_counts_distinct_secrets():
    assert secrets_note({"a": [STRIPE, "x"], "b": {"c": STRIPE}}, [f"t {JWT}"]) == (
        "2 secret-shaped values were masked"
    )
    assert secrets_note({"a": "plain"}) is None


HYPOTHESIS = {
    "title": "Gadget sales fell", "story": "s", "expected": "e", "dimensions": ["product"],
    "segment": {"product": "Gadget"}, "category": "rate", "prior": 0.5,
}  # fmt: skip
SPLIT = {
    "table": "products", "metric": {"agg": "sum", "column": "revenue"}, "time_column": "day",
    "group_by": ["product"], "baseline": {"start": "2024-01-01", "end": "2024-01-07"},
    "comparison": {"start": "2024-01-08", "end": "2024-01-14"},
}  # fmt: skip
SCRIPT = [  # every hypothesis: a sample of every row, the split by product, a rule-out
    ("metric_sample", {"table": "products", "n": 200}),
    ("metric_compare_periods", SPLIT),
    ("conclude", {"status": "ruled_out", "confidence": "low", "summary": "s", "evidence": ["q-1"]}),
]


def _model(body: dict[str, Any], n: int) -> dict[str, Any]:
    """Proposes one hypothesis; investigates it, and the engine's root causes, by ``SCRIPT``."""
    if body.get("tool_choice", {}).get("type") == "tool":
        return reply("propose_hypotheses", {"hypotheses": [HYPOTHESIS]}, n)
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    name, args = SCRIPT[min(turn, len(SCRIPT) - 1)]
    return reply(name, args, n)


def test_secrets_named_as_root_causes_are_masked_in_everything_written(tmp_path):
    csv = tmp_path / "products.csv"
    products = ["Widget", STRIPE, JWT, "Gadget", "Gizmo"]
    csv.write_text(weeks_csv("product", products, falling=[STRIPE, JWT]), encoding="utf-8")
    proc, seen, out = investigate_with_model(
        tmp_path, _model, [str(csv)],
        ["--metric", "sum(revenue)", "--time-column", "day",
         "--baseline", WEEKS[0], "--comparison", WEEKS[1]],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    named = {v for rc in result["root_causes"] for v in rc["segment"].values()}
    assert named == {"sk_live_" + MASK, "eyJ" + MASK}
    assert "2 secret-shaped values were masked" in result["notes"]

    tails = [STRIPE, JWT, STRIPE[8:], JWT.split(".")[2]]
    texts = {"console": proc.stdout + proc.stderr, "store": store_text(tmp_path / "memory.duckdb")}
    texts |= {f"request {i}": json.dumps(s["body"], ensure_ascii=False) for i, s in enumerate(seen)}
    written = [p for p in out.rglob("*") if p.is_file() and p.name != "data.duckdb"]
    assert {"report.md", "report.html", "result.json", "evidence.jsonl"} <= {
        p.name for p in written
    }
    texts |= {p.name: p.read_bytes().decode("utf-8", "replace") for p in written}
    for where, text in texts.items():
        assert [t for t in tails if t in text] == [], where
    for name in ("report.md", "report.html"):
        page = (out / name).read_text(encoding="utf-8")
        assert "sk_live_" + MASK in page and "2 secret-shaped values were masked" in page
    assert "root cause: product=sk_live_" + MASK in proc.stdout
    assert any("sk_live_" + MASK in json.dumps(s["body"], ensure_ascii=False) for s in seen)


def _percent(text: str) -> str:
    return "".join(f"%{ord(ch):02X}" for ch in text)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


ENCODED = {  # a value holding STRIPE encoded -> the start it keeps
    "form value": (f"key%3D{STRIPE}", "key%3Dsk_live_"),
    "whole url query": (quote(f"https://x.test/cb?key={STRIPE}&a=1", safe=""), "https%3A"),
    "twice encoded": (quote(quote(f"key={STRIPE}", safe=""), safe=""), "key%253Dsk_live_"),
    "every byte escaped": (_percent(STRIPE), "%73%6B%5F%6C%69%76%65%5F"),
    "plus before": (f"a+{STRIPE}", "a+sk_live_"),
    "escaped plus before": (f"a%2B{STRIPE}", "a%2Bsk_live_"),
    "base64": (_b64(STRIPE), "c2tfbGl2ZV"),
    "base64 of a sentence": (_b64(f"the token is {STRIPE}, keep it"), _b64("the token is")[:16]),
    "base64url": (base64.urlsafe_b64encode(f"?>{STRIPE}~".encode()).decode(), "Pz5za19saXZlX"),
    "base64 after a word": ("tok_" + _b64(f"k={STRIPE}"), "tok_az1za19saXZlX"),
    "base64, percent-encoded": (quote(_b64(f"a>{STRIPE}?>"), safe=""), "YT5za19saXZlX"),
    "percent-encoded, base64": (_b64(quote(f"k={STRIPE}", safe="")), "ayUzRHNrX2xpdmVf"),
    "base64 of a JWT": (_b64(JWT), _b64(JWT)[:3]),
}


@pytest.mark.parametrize("shape", ENCODED)
def test_an_encoded_secret_is_masked_where_it_is_encoded(shape):
    value, kept = ENCODED[shape]
    out = mask_secrets(f"x {value} y")
    assert out.startswith(f"x {kept}") and MASK in out and out.endswith(" y"), out
    assert STRIPE[10:20] not in unquote(unquote(out))
    for text in (out, dumps({value: [value]}), printable_line(value, 400)):
        assert value not in text
    assert mask_secrets(out) == out  # idempotent
    assert secrets_note([value]) == "1 secret-shaped value was masked"


@pytest.mark.parametrize(
    "value",
    [
        "https://example.com/a%20b?q=risk_live_events%2Cx",
        "%E2%82%AC100 and 50%25 off",
        _b64("an ordinary sentence that is long enough to decode"),
        base64.b64encode(bytes(range(256)) * 8).decode(),  # a binary blob, as a data URI holds
        "/home/ops/data/2024/sales_by_region_and_product.csv",
    ],
)
def test_ordinary_encoded_text_is_left_alone(value):
    assert mask_secrets(value) == value


def test_keys_are_masked_and_two_keys_never_merge_into_one():
    other = STRIPE[:-4] + "WXYZ"
    doc = {STRIPE: 1, other: 2, "sk_live_" + MASK: 3, "plain": {f"a{_b64(STRIPE)}": 4}}
    out = json.loads(dumps(doc))
    assert list(out) == ["sk_live_" + MASK + " (1)", "sk_live_" + MASK + " (2)",
                         "sk_live_" + MASK, "plain"]  # fmt: skip
    assert json.loads(dumps(out)) == out  # idempotent
    assert json.loads(dumps(dict(reversed(doc.items())))) == dict(reversed(out.items()))
    assert masked(doc) == out
    assert STRIPE not in json.dumps(masked(doc)) and other not in json.dumps(masked(doc))


@pytest.mark.parametrize(
    ("cells", "shown"),
    [
        (["sk_live_", STRIPE[8:], "x"], ["sk_live_", MASK, "x"]),
        ({"a": "sk_live_", "b": STRIPE[8:] + " tail"}, {"a": "sk_live_", "b": MASK + " tail"}),
        (["token ghp_", "16C7e42F292c6912E7710c838347Ae178B4a"], ["token ghp_", MASK]),
        (["sk_live_", "2024-01-01"], ["sk_live_", "2024-01-01"]),
        (["risk_live_", STRIPE[8:]], ["risk_live_", STRIPE[8:]]),
    ],
)
def test_a_key_split_across_two_cells_side_by_side_is_masked(cells, shown):
    assert masked(cells) == shown
    assert json.loads(dumps(cells)) == shown
