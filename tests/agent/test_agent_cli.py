"""`drilldown investigate` with a key: the CLI, run as a user runs it, talks to a local HTTP
endpoint (``ANTHROPIC_BASE_URL``) that answers with a scripted transcript. The result has the
same shape as the offline path's, with the model's usage and cost."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.agent.test_agent import handles
from tests.test_hostile_values import LINK, PRODUCTS, RLO, ZWSP, weeks_csv

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<(untrusted-data-[0-9a-f]{12}) source=\"[^\"]*\">\n(.*)\n</\1>", re.S)
PERIODS = {
    "baseline": {"start": "2024-03-18", "end": "2024-03-24"},
    "comparison": {"start": "2024-03-25", "end": "2024-03-31"},
}


def reply(name: str, args: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": args}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 2000, "output_tokens": 150},
    }


def analyst(body: dict[str, Any], n: int) -> dict[str, Any]:
    """Proposes two hypotheses; investigates ios 5.2 to a confirmed finding and android to a
    rule-out, reading the numbers from the tool results it is sent and the handles of tables
    and columns from the names block."""
    h = handles(body)
    if body.get("tool_choice", {}).get("type") == "tool":
        hyps = [
            {
                "title": "The 5.2 iOS release broke checkout",
                "story": "A release bug.",
                "expected": "ios 5.2 revenue falls, 5.1 does not.",
                "dimensions": [h["app_version"]],
                "segment": {h["platform"]: "ios", h["app_version"]: "5.2"},
                "category": "rate",
                "prior": 0.7,
            },
            {
                "title": "Android revenue fell",
                "story": "A payment provider outage.",
                "expected": "android revenue falls.",
                "dimensions": [h["platform"]],
                "segment": {h["platform"]: "android"},
                "category": "rate",
                "prior": 0.3,
            },
        ]
        return reply("propose_hypotheses", {"hypotheses": hyps}, n)
    hid = re.search(r'<hypothesis id="(h\d+)">', body["messages"][0]["content"]).group(1)
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    base = {
        "table": h["events"], "metric": {"agg": "sum", "column": h["revenue"]},
        "time_column": h["date"], **PERIODS,
    }  # fmt: skip
    if hid == "h2":
        if turn == 0:
            return reply("metric_compare_periods", {**base, "group_by": [h["platform"]]}, n)
        return reply(
            "conclude",
            {
                "status": "ruled_out",
                "confidence": "medium",
                "summary": "Android barely moved.",
                "evidence": ["q-1"],
            },
            n,
        )
    if turn == 0:
        args = {
            **base,
            "group_by": [h["app_version"]],
            "filters": [{"column": h["platform"], "op": "=", "value": "ios"}],
        }
        return reply("metric_compare_periods", args, n)
    if turn == 1:
        block = body["messages"][-1]["content"][0]["content"]
        payload = json.loads(BLOCK.search(block).group(2))
        row = next(r for r in payload["rows"] if str(r[h["app_version"]]) == "5.2")
        return reply(
            "write_finding",
            {
                "segment": {h["platform"]: "ios", h["app_version"]: "5.2"},
                "category": "rate",
                "title": "iOS 5.2 revenue fell",
                "summary": "Revenue on ios 5.2 collapsed.",
                "evidence": [payload["evidence_id"]],
                "baseline_value": row["baseline"],
                "comparison_value": row["comparison"],
            },
            n,
        )
    return reply(
        "conclude",
        {
            "status": "confirmed",
            "confidence": "high",
            "summary": "The 5.2 release.",
            "evidence": ["q-1"],
        },
        n,
    )


Responder = Callable[[dict[str, Any], int], dict[str, Any]]


def investigate_with_model(
    tmp_path: Path, responder: Responder, data: list[str], question: list[str]
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], Path]:
    """``drilldown investigate DATA QUESTION`` with a key, against a local endpoint that answers
    every request with ``responder(body, n)``; returns the process, the requests and OUT."""
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with lock:
                seen.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("x-api-key") or self.headers.get("authorization"),
                        "body": body,
                    }
                )
                n = len(seen)
            data = json.dumps(responder(body, n)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    out = tmp_path / "out"
    try:
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "sk-ant-test-key",
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_port}",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DRILLDOWN_STORE_PATH": str(tmp_path / "memory.duckdb"),
        }
        proc = subprocess.run(
            [
                sys.executable, "-m", "drilldown.cli", "investigate", *data, *question,
                "--out", str(out),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=300,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    return proc, seen, out


def test_investigate_with_claude_through_http(tmp_path):
    proc, seen, out = investigate_with_model(
        tmp_path,
        analyst,
        ["data/demo/events.csv", "data/demo/users.csv"],
        [
            "--metric", "sum(revenue)", "--table", "events", "--time-column", "date",
            "--baseline", "2024-03-18:2024-03-24", "--comparison", "2024-03-25:2024-03-31",
        ],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "claude-sonnet-5-5" in proc.stderr
    result = json.loads((out / "result.json").read_text())
    status = {h["title"]: h["status"] for h in result["hypotheses"]}
    assert status == {
        "The 5.2 iOS release broke checkout": "confirmed",
        "Android revenue fell": "ruled_out",
    }
    [accepted] = [f for f in result["findings"] if f["status"] == "accepted"]
    assert accepted["segment"] == {"platform": "ios", "app_version": "5.2"}
    agent = result["stats"]["agent"]
    assert agent["mode"] == "claude" and agent["usage"]["requests"] == len(seen) == 6
    assert agent["usage"]["cost_usd"] > 0
    assert all(s["path"] == "/v1/messages" for s in seen)
    assert "sk-ant-test-key" not in (out / "report.md").read_text()
    assert "Model use: 6 requests" in (out / "report.md").read_text()
    assert (out / "evidence.jsonl").read_text().count("\n") == agent["ledger_entries"] == 5


def test_the_model_reads_invisible_and_control_characters_as_escapes(tmp_path):
    """What the model reads of a cell: ``Wid\\u200bget``, never a second ``Widget``, and no raw
    direction override or terminal sequence; the value it sends back still selects its rows."""
    csv = tmp_path / "products.csv"
    csv.write_text(weeks_csv("product", PRODUCTS, falling=[ZWSP, RLO, LINK]), encoding="utf-8")
    read_handles: dict[str, str] = {}

    def model(body: dict[str, Any], n: int) -> dict[str, Any]:
        h = read_handles
        h.update(handles(body))
        if body.get("tool_choice", {}).get("type") == "tool":
            hyp = {
                "title": "Wid\u200bget sales fell", "story": "s", "expected": "e",
                "dimensions": [h["product"]], "segment": {h["product"]: ZWSP}, "category": "rate",
                "prior": 0.5,
            }  # fmt: skip
            return reply("propose_hypotheses", {"hypotheses": [hyp]}, n)
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turn == 0:
            return reply("metric_sample", {"table": h["products"], "n": 200}, n)
        if turn == 1:
            filters = [{"column": h["product"], "op": "=", "value": ZWSP}]
            return reply("metric_sample", {"table": h["products"], "filters": filters}, n)
        summary = {"status": "ruled_out", "confidence": "low", "summary": "s", "evidence": ["q-1"]}
        return reply("conclude", summary, n)

    proc, seen, _ = investigate_with_model(
        tmp_path,
        model,
        [str(csv)],
        [
            "--metric", "sum(revenue)", "--time-column", "day", "--baseline",
            "2024-01-01:2024-01-07", "--comparison", "2024-01-08:2024-01-14",
        ],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    read: list[str] = []  # every text the model was sent, as it reads it
    for s in seen:
        for m in s["body"]["messages"]:
            content = m["content"]
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            for b in blocks:
                read.append(b.get("content") if b.get("type") == "tool_result" else b.get("text"))
    read = [t for t in read if isinstance(t, str)]
    text = "\n".join(read)
    assert not any(ch in text for ch in ("\u200b", "\u202e", "\x1b"))
    product = read_handles["product"]
    assert f'"{product}":"Wid\\u200bget"' in text and f'"{product}":"Widget"' in text
    assert "abc\\u202efdp.exe" in text and "\\u001b[2J" in text
    results = [json.loads(BLOCK.search(b).group(2)) for b in read if BLOCK.search(b)]
    filtered = [r for r in results if r.get("params") == {"p1": ZWSP}]
    assert filtered, "the model never read the filtered sample"
    for r in filtered:  # one per hypothesis the model investigated
        assert r["matched_count"] == 42
        assert {row[product] for row in r["rows"]} == {ZWSP}
