"""``drilldown mcp``: the SQL tools over MCP (stdio), run as a client runs it (a subprocess).

Talks to the real server with the MCP SDK's stdio client, and once with raw JSON-RPC lines at
protocol 2025-06-18; every wait is bounded and every server process is stopped.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from sql_tools import ToolContext
from sql_tools.registry import input_schema
from tasks.tools import TOOLS
from tests.support.cli import file_digest

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
SESSION_TIMEOUT_S = 60
COMPARE = {
    "table": "sales",
    "metric": {"agg": "sum", "column": "revenue"},
    "time_column": "day",
    "baseline": {"start": "2024-01-01", "end": "2024-01-07"},
    "comparison": {"start": "2024-01-08", "end": "2024-01-14"},
    "group_by": ["region", "customers.tier"],
}


def server_command(db: Path) -> list[str]:
    return [sys.executable, "-m", "drilldown.cli", "mcp", "--db", str(db)]


def with_session(
    db: Path, errlog: Path, scenario: Callable[[ClientSession], Awaitable[Any]]
) -> Any:
    """Start ``drilldown mcp`` on ``db``, initialize a client session, run ``scenario``."""
    cmd = server_command(db)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=ENV, cwd=ROOT)

    async def main() -> Any:
        with anyio.fail_after(SESSION_TIMEOUT_S), errlog.open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    return await scenario(session)

    return anyio.run(main)


def drilldown_tool(db: Path, name: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "drilldown.cli",
            "tool",
            name,
            "--db",
            str(db),
            "--args",
            json.dumps(args),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **ENV},
        timeout=120,
    )
    return proc.returncode, json.loads(proc.stdout)


def payload(result: Any) -> dict[str, Any]:
    """The JSON text content of a tool result, checked against its structured content."""
    assert len(result.content) == 1 and result.content[0].type == "text"
    data = json.loads(result.content[0].text)
    assert data == result.structured_content
    return data


def without_timing(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "elapsed_ms"}


def property_names(node: Any) -> set[str]:
    """Every property name anywhere in a JSON schema (nested models and $defs included)."""
    names: set[str] = set()
    if isinstance(node, dict):
        names.update(node.get("properties", {}))
        for v in node.values():
            names |= property_names(v)
    elif isinstance(node, list):
        for v in node:
            names |= property_names(v)
    return names


def test_initialize_and_the_tool_list_come_from_the_registry(shop_db, tmp_path):
    async def scenario(session: ClientSession) -> Any:
        init = await session.initialize()
        await session.send_ping()
        return init, await session.list_tools()

    init, listed = with_session(shop_db, tmp_path / "stderr.txt", scenario)

    assert init.server_info.name == "drilldown"
    assert init.capabilities.tools is not None
    assert "metric_describe" in (init.instructions or "")
    assert [t.name for t in listed.tools] == [t.name for t in TOOLS]
    with ToolContext(shop_db) as ctx:
        for tool, spec in zip(listed.tools, TOOLS, strict=True):
            assert tool.description == spec.description
            assert tool.input_schema == input_schema(spec, ctx)
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
    schema = {t.name: t.input_schema for t in listed.tools}["metric_compare_periods"]
    assert schema["properties"]["table"]["enum"] == ["customers", "sales", "visits"]
    group_by = schema["properties"]["group_by"]["items"]["enum"]
    assert {"region", "revenue", "customers.tier"} <= set(group_by)
    assert "regionx" not in group_by
    # No tool can be handed SQL, an expression or code: the only road to a write does not exist.
    for tool in listed.tools:
        assert not property_names(tool.input_schema) & {"sql", "query", "expression", "code"}
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


def test_compare_periods_returns_what_drilldown_tool_returns(shop_db, tmp_path):
    async def scenario(session: ClientSession) -> Any:
        await session.initialize()
        return await session.call_tool("metric_compare_periods", COMPARE)

    result = with_session(shop_db, tmp_path / "stderr.txt", scenario)

    assert result.is_error is False
    got = payload(result)
    code, expected = drilldown_tool(shop_db, "metric_compare_periods", COMPARE)
    assert code == 0
    assert without_timing(got) == without_timing(expected)
    assert got["total"] == {
        "baseline": 200.0,
        "comparison": 170.0,
        "delta": -30.0,
        "relative_delta": pytest.approx(-0.15),
    }
    assert (got["rows"][0]["region"], got["rows"][0]["customers.tier"]) == ("EU", "gold")


def test_a_wrong_column_is_a_tool_error_that_lists_the_valid_names(shop_db, tmp_path):
    bad = {**COMPARE, "group_by": ["regionx"]}

    async def scenario(session: ClientSession) -> Any:
        await session.initialize()
        wrong = await session.call_tool("metric_compare_periods", bad)
        unknown = await session.call_tool("drop_table", {"table": "sales"})
        # The session is still usable after errors.
        ok = await session.call_tool("metric_describe", {"table": "sales"})
        return wrong, unknown, ok

    wrong, unknown, ok = with_session(shop_db, tmp_path / "stderr.txt", scenario)

    assert wrong.is_error is True
    error = payload(wrong)["error"]
    assert error["code"] == "unknown_column"
    assert "unknown column 'regionx'" in error["message"]
    assert "valid: day, region, product, revenue" in error["message"]
    assert "\n" not in error["message"]
    assert {"region", "customers.tier"} <= set(error["valid_values"])
    code, expected = drilldown_tool(shop_db, "metric_compare_periods", bad)
    assert code == 2 and payload(wrong) == expected
    assert unknown.is_error is True
    assert payload(unknown)["error"]["code"] == "unknown_tool"
    assert "metric_compare_periods" in payload(unknown)["error"]["valid_values"]
    assert ok.is_error is False
    assert [t["name"] for t in payload(ok)["tables"]] == ["sales"]


def test_the_database_file_is_never_modified(make_db, tmp_path):
    db = make_db("sales.csv", "customers.csv")
    before = (file_digest(db), db.stat().st_mtime_ns, db.stat().st_size)

    async def scenario(session: ClientSession) -> Any:
        await session.initialize()
        results = [
            await session.call_tool("metric_describe", {}),
            await session.call_tool("metric_sample", {"table": "sales"}),
            await session.call_tool(
                "metric_aggregate",
                {"table": "sales", "measures": [{"agg": "sum", "column": "revenue"}]},
            ),
            await session.call_tool("metric_compare_periods", COMPARE),
            # Anything that is not a declared argument is refused before it reaches the data.
            await session.call_tool("metric_sample", {"table": "sales", "sql": "DROP TABLE sales"}),
            await session.call_tool("metric_sample", {"table": "sales; DROP TABLE sales"}),
        ]
        return results

    results = with_session(db, tmp_path / "stderr.txt", scenario)

    assert [r.is_error for r in results] == [False, False, False, False, True, True]
    assert payload(results[4])["error"]["code"] == "invalid_arguments"
    assert payload(results[5])["error"]["code"] == "unknown_table"
    assert (file_digest(db), db.stat().st_mtime_ns, db.stat().st_size) == before
    assert not db.with_name(db.name + ".wal").exists()


def test_a_missing_database_is_a_one_line_error_before_serving(tmp_path):
    missing = tmp_path / "missing.duckdb"
    proc = subprocess.run(
        server_command(missing),
        capture_output=True,
        text=True,
        input="",
        cwd=ROOT,
        env={**os.environ, **ENV},
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"error: database file not found: {str(missing)!r}"]
    assert not missing.exists()


class LineReader:
    """Reads newline-terminated messages from a pipe with a deadline."""

    def __init__(self, stream: Any) -> None:
        self.fd = stream.fileno()
        self.buf = b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)

    def line(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                raise TimeoutError("no message from the server in time")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                raise EOFError("server closed stdout")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8")


class RawSession:
    """``drilldown mcp`` as a subprocess, spoken to in raw JSON-RPC lines."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            server_command(db),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, **ENV},
        )
        self.reader = LineReader(self.proc.stdout)

    def send(self, message: dict[str, Any] | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def request(self, rid: int, method: str, params: dict[str, Any] | None = None) -> dict:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return self.reply(rid)

    def reply(self, rid: int | None) -> dict:
        reply = json.loads(self.reader.line())
        assert reply["jsonrpc"] == "2.0" and reply["id"] == rid, reply
        return reply

    def initialize(self) -> dict:
        init = self.request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        )["result"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return init

    def finish(self) -> str:
        """Close stdin; the server must exit 0 with nothing more on stdout. Returns stderr."""
        self.proc.stdin.close()  # end of session: the server exits on its own
        assert self.proc.wait(timeout=30) == 0
        assert self.proc.stdout.read() == b"" and self.reader.buf == b""
        return self.proc.stderr.read().decode()

    def __enter__(self) -> RawSession:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream and not stream.closed:
                stream.close()


def test_raw_json_rpc_at_2025_06_18_and_nothing_else_on_stdout(shop_db):
    with RawSession(shop_db) as raw:
        init = raw.initialize()
        assert init["protocolVersion"] == "2025-06-18"
        assert init["serverInfo"]["name"] == "drilldown"
        assert "tools" in init["capabilities"]
        assert raw.request(2, "ping")["result"] == {}
        tools = raw.request(3, "tools/list")["result"]["tools"]
        assert [t["name"] for t in tools] == [t.name for t in TOOLS]
        assert all(t["inputSchema"]["type"] == "object" for t in tools)
        call = raw.request(4, "tools/call", {"name": "metric_describe", "arguments": {}})["result"]
        assert call["isError"] is False
        assert json.loads(call["content"][0]["text"]) == call["structuredContent"]
        bad = raw.request(
            5, "tools/call", {"name": "metric_sample", "arguments": {"table": "nope"}}
        )
        assert bad["result"]["isError"] is True
        assert (
            "valid: customers, sales, visits"
            in bad["result"]["structuredContent"]["error"]["message"]
        )
        stderr = raw.finish()  # nothing but protocol on stdout
        assert "serving MCP over stdio" in stderr and "Traceback" not in stderr


def test_a_deeply_nested_request_is_answered_and_the_session_goes_on(make_db):
    """3,000 levels of nesting: the SDK dropped the line unanswered, so the client waited."""
    db = make_db("sales.csv")
    before = file_digest(db)
    deep = "[" * 3000 + "]" * 3000
    with RawSession(db) as raw:
        raw.initialize()
        raw.send(
            '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": '
            '{"name": "metric_describe", "arguments": {"table": ' + deep + "}}}"
        )
        error = raw.reply(2)["error"]
        assert error["code"] == -32602
        assert error["message"] == (
            "invalid_arguments: request nested too deeply (3,003 levels); tool arguments may "
            "nest at most 32 levels"
        )
        raw.send("this is not JSON")
        assert raw.reply(None)["error"]["code"] == -32700
        ok = raw.request(3, "tools/call", {"name": "metric_describe", "arguments": {}})
        assert ok["result"]["isError"] is False
        assert [t["name"] for t in ok["result"]["structuredContent"]["tables"]] == ["sales"]
        stderr = raw.finish()
    assert "Traceback" not in stderr
    assert file_digest(db) == before


def test_integers_beyond_2_53_are_strings_in_mcp_responses(make_db):
    """A JavaScript client reads 1152921504606846977 as 1152921504606846976: the server writes
    such integers as strings, in the text and in the structured content alike."""
    db = make_db(accounts="account,units\n9223372036854775808,1152921504606846977\n17,2\n")

    def no_big_literal(literal: str) -> int:
        assert abs(int(literal)) < 2**53, f"bare integer {literal} in the response"
        return int(literal)

    with RawSession(db) as raw:
        raw.initialize()
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "metric_sample", "arguments": {"table": "accounts"}},
            }
        )
        line = raw.reader.line()
        raw.finish()
    result = json.loads(line, parse_int=no_big_literal)["result"]
    text = json.loads(result["content"][0]["text"], parse_int=no_big_literal)
    assert text == result["structuredContent"]
    assert text["rows"] == [
        {"account": "9223372036854775808", "units": "1152921504606846977"},
        {"account": 17, "units": 2},
    ]
