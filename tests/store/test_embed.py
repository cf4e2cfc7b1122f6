"""Embedders: WordLlama offline by default, Voyage AI when configured, never mixed in a search."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from tasks.store import DuckDBStore
from tasks.store.embed import (
    DIM,
    EmbedderConfigError,
    VoyageEmbedder,
    WordLlamaEmbedder,
    embedder_from_config,
)
from tests.support.records import de_signup_drop, ios_revenue_drop


def test_wordllama_loads_its_bundled_weights_without_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    vectors = WordLlamaEmbedder().embed(
        ["revenue fell on ios", "ios revenue dropped", "DE signups"]
    )
    assert vectors.shape == (3, DIM)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


class VoyageStub:
    """Answers POST /v1/embeddings like the Voyage API, recording the request bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(
                    {**body, "path": self.path, "auth": self.headers["Authorization"]}
                )
                rng = np.random.default_rng(len(body["input"][0]))
                data = [
                    {
                        "embedding": rng.standard_normal(body["output_dimension"]).tolist(),
                        "index": i,
                    }
                    for i, _ in enumerate(body["input"])
                ]
                out = json.dumps({"data": data, "usage": {"total_tokens": 7}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def voyage():
    stub = VoyageStub()
    yield stub
    stub.close()


def test_voyage_asks_for_256_dimensions_and_names_its_vectors(voyage, tmp_path: Path, embedder):
    env = {"VOYAGE_API_KEY": "test-key", "VOYAGE_BASE_URL": voyage.base_url}
    hosted = embedder_from_config(env)
    assert isinstance(hosted, VoyageEmbedder) and hosted.model == "voyage/voyage-4-lite-256"
    with DuckDBStore(tmp_path / "s.duckdb", embedder=hosted) as store:
        store.save_investigation(ios_revenue_drop())
        hits = store.search_similar("ios revenue", k=3)
        assert [h.run_id for h in hits] == ["run-ios-revenue"]
        assert hits[0].embedding_model == "voyage/voyage-4-lite-256"
    doc, query = voyage.bodies
    assert doc["path"] == "/v1/embeddings" and doc["auth"] == "Bearer test-key"
    assert doc["model"] == "voyage-4-lite" and doc["output_dimension"] == 256
    assert (doc["input_type"], query["input_type"]) == ("document", "query")
    # the same file searched with the offline model: Voyage vectors are not comparable, not found
    with DuckDBStore(tmp_path / "s.duckdb", embedder=embedder) as store:
        assert store.search_similar("ios revenue", k=3) == []
        store.save_investigation(de_signup_drop())
        assert [h.run_id for h in store.search_similar("ios revenue", k=3)] == ["run-de-signups"]


def test_embedder_config():
    assert isinstance(embedder_from_config({}), WordLlamaEmbedder)
    forced = embedder_from_config({"VOYAGE_API_KEY": "k", "DRILLDOWN_EMBEDDER": "wordllama"})
    assert isinstance(forced, WordLlamaEmbedder)
    model = embedder_from_config({"VOYAGE_API_KEY": "k", "DRILLDOWN_VOYAGE_MODEL": "voyage-4"})
    assert model.model == "voyage/voyage-4-256"
    with pytest.raises(EmbedderConfigError, match="needs VOYAGE_API_KEY"):
        embedder_from_config({"DRILLDOWN_EMBEDDER": "voyage"})
    with pytest.raises(EmbedderConfigError, match="got 'bert'"):
        embedder_from_config({"DRILLDOWN_EMBEDDER": "bert"})
