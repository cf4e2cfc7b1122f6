"""A local stand-in for Supabase Storage's object list and download endpoints.

A real HTTP server on 127.0.0.1 in a thread, serving buckets that are folders on disk, answering
the way the Storage API does (folder entries with a null id, `{"statusCode": "404", ...}` bodies
with HTTP 400 for a missing bucket or object). Tests can queue failures per object and change the
metadata a listing reports, to exercise retries and integrity checks.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote


class FakeStorage:
    def __init__(self, root: Path, key: str = "test-key") -> None:
        self.root = root
        self.key = key
        self.fail: dict[str, list[int]] = defaultdict(list)  # object key -> statuses to answer
        self.metadata_override: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, code: int, body: Any, ctype: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if self.headers.get("apikey") != outer.key:
                    self._send(400, {"statusCode": "403", "error": "Unauthorized",
                                     "message": "Invalid Compact JWS"})  # fmt: skip
                    return False
                return True

            def _parts(self) -> list[str]:
                return [unquote(p) for p in self.path.split("?")[0].split("/")[1:]]

            def do_POST(self) -> None:
                p = self._parts()
                outer.requests.append(("POST", "/".join(p)))
                if not self._authorised():
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if p[:4] != ["storage", "v1", "object", "list"] or len(p) != 5:
                    return self._send(404, {"message": "not implemented in the fake"})
                bucket = outer.root / p[4]
                if not bucket.is_dir():
                    return self._send(400, {"statusCode": "404", "error": "Bucket not found",
                                            "message": "Bucket not found"})  # fmt: skip
                folder = bucket / body.get("prefix", "")
                names = sorted(c.name for c in folder.iterdir()) if folder.is_dir() else []
                start = int(body.get("offset", 0))
                entries = []
                for name in names[start : start + int(body.get("limit", 100))]:
                    path = folder / name
                    if path.is_dir():
                        entries.append({"name": name, "id": None, "metadata": None})
                        continue
                    key = str(path.relative_to(bucket))
                    meta = {"size": path.stat().st_size, "mimetype": "text/csv",
                            "eTag": '"' + hashlib.md5(path.read_bytes()).hexdigest() + '"'}  # fmt: skip
                    meta.update(outer.metadata_override.get(key, {}))
                    entries.append({"name": name, "id": "id-" + key, "metadata": meta})
                self._send(200, entries)

            def do_GET(self) -> None:
                p = self._parts()
                outer.requests.append(("GET", "/".join(p)))
                if not self._authorised():
                    return
                if p[:3] != ["storage", "v1", "object"] or len(p) < 5:
                    return self._send(404, {"message": "not implemented in the fake"})
                key = "/".join(p[4:])
                if outer.fail.get(key):
                    status = outer.fail[key].pop(0)
                    return self._send(status, {"statusCode": str(status), "error": "Unavailable",
                                               "message": "upstream unavailable"})  # fmt: skip
                path = outer.root / p[3] / key
                if not path.is_file():
                    return self._send(400, {"statusCode": "404", "error": "not_found",
                                            "message": "Object not found"})  # fmt: skip
                self._send(200, path.read_bytes(), "text/csv")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def put(self, bucket: str, key: str, data: bytes) -> None:
        path = self.root / bucket / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def downloads(self, key: str) -> int:
        return sum(1 for m, p in self.requests if m == "GET" and p.endswith("/" + key))

    def __enter__(self) -> FakeStorage:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
