"""supabase:// data locations: listed, downloaded and verified through supabase-py's Storage client,
against a local HTTP stand-in of the Storage API."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tasks.ingest.storage import (
    BucketNotFound,
    DownloadMismatch,
    NoFilesFound,
    StorageConfigError,
    StorageUnavailable,
    StorageURLError,
    download_uploads,
    parse_storage_url,
    storage_client,
)
from tests.support.fake_storage import FakeStorage

EVENTS = b"date,platform,revenue\n2024-03-18,ios,10\n2024-03-25,ios,4\n"
USERS = b"user_id,plan\n1,free\n2,pro\n"


@pytest.fixture
def fake(tmp_path: Path):
    with FakeStorage(tmp_path / "buckets") as f:
        f.put("uploads", "acme/week12/events.csv", EVENTS)
        f.put("uploads", "acme/week12/dims/users.csv", USERS)
        f.put("uploads", "acme/week11/events.csv", b"other,week\n1,2\n")
        yield f


@pytest.fixture
def client(fake: FakeStorage):
    return storage_client(fake.url, fake.key)


def fetch(client, url: str, dest: Path, **kw):
    kw.setdefault("backoff", 0.0)
    return download_uploads(url, dest, client=client, **kw)


def test_downloads_every_file_under_the_prefix_with_its_folders(client, tmp_path: Path):
    paths = fetch(client, "supabase://uploads/acme/week12", tmp_path / "out")
    rel = sorted(str(p.relative_to(tmp_path / "out")) for p in paths)
    assert rel == ["dims/users.csv", "events.csv"]
    assert (tmp_path / "out" / "events.csv").read_bytes() == EVENTS
    assert (tmp_path / "out" / "dims" / "users.csv").read_bytes() == USERS
    assert not list((tmp_path / "out").rglob("*.part"))


def test_a_prefix_naming_one_file_downloads_that_file(client, tmp_path: Path):
    paths = fetch(client, "supabase://uploads/acme/week12/events.csv", tmp_path / "one")
    assert [p.name for p in paths] == ["events.csv"] and paths[0].read_bytes() == EVENTS


def test_transient_503_is_retried_and_the_file_arrives(fake: FakeStorage, client, tmp_path: Path):
    fake.fail["acme/week12/events.csv"] = [503, 503]
    slept: list[float] = []
    out = tmp_path / "out"
    paths = fetch(client, "supabase://uploads/acme/week12", out, sleep=slept.append, backoff=0.5)
    assert (tmp_path / "out" / "events.csv") in paths
    assert (tmp_path / "out" / "events.csv").read_bytes() == EVENTS
    assert fake.downloads("acme/week12/events.csv") == 3
    assert slept == [0.5, 1.0]  # exponential backoff


def test_persistent_5xx_gives_up_with_one_line(fake: FakeStorage, client, tmp_path: Path):
    fake.fail["acme/week12/events.csv"] = [503] * 10
    with pytest.raises(StorageUnavailable, match=r"after 3 attempts.*HTTP 503") as ei:
        fetch(client, "supabase://uploads/acme/week12", tmp_path / "out", retries=2)
    assert "\n" not in str(ei.value)
    assert fake.downloads("acme/week12/events.csv") == 3


def test_size_mismatch_is_rejected_and_nothing_is_written(fake: FakeStorage, client, tmp_path):
    fake.metadata_override["acme/week12/events.csv"] = {"size": len(EVENTS) + 7}
    with pytest.raises(DownloadMismatch, match=r"downloaded \d+ bytes, the bucket lists \d+"):
        fetch(client, "supabase://uploads/acme/week12", tmp_path / "out")
    assert not (tmp_path / "out" / "events.csv").exists()


def test_sha256_is_checked_when_listed(fake: FakeStorage, client, tmp_path: Path):
    good = hashlib.sha256(EVENTS).hexdigest()
    fake.metadata_override["acme/week12/events.csv"] = {"sha256": good}
    assert fetch(client, "supabase://uploads/acme/week12/events.csv", tmp_path / "ok")
    fake.metadata_override["acme/week12/events.csv"] = {"sha256": "0" * 64}
    with pytest.raises(DownloadMismatch, match="SHA-256"):
        fetch(client, "supabase://uploads/acme/week12/events.csv", tmp_path / "bad")
    assert not (tmp_path / "bad" / "events.csv").exists()


def test_missing_bucket_and_empty_prefix_are_clear_errors(client, tmp_path: Path):
    with pytest.raises(BucketNotFound, match="'nope'"):
        fetch(client, "supabase://nope/x", tmp_path / "out")
    with pytest.raises(NoFilesFound, match="no files under 'supabase://uploads/acme/week99'"):
        fetch(client, "supabase://uploads/acme/week99", tmp_path / "out")


@pytest.mark.parametrize(
    "url",
    ["s3://uploads/x", "supabase://", "supabase:///prefix", "supabase://b/../etc", "uploads/x"],
)
def test_bad_urls_are_value_errors(url: str):
    with pytest.raises(StorageURLError) as ei:
        parse_storage_url(url)
    assert isinstance(ei.value, ValueError) and "\n" not in str(ei.value)


def test_parse_storage_url():
    loc = parse_storage_url("supabase://uploads//acme/week12/")
    assert (loc.bucket, loc.prefix) == ("uploads", "acme/week12")
    assert str(loc) == "supabase://uploads/acme/week12"


def test_credentials_come_from_the_environment(monkeypatch, fake: FakeStorage, tmp_path: Path):
    monkeypatch.delenv("SUPABASE_URL", raising=False)
    monkeypatch.delenv("SUPABASE_KEY", raising=False)
    with pytest.raises(StorageConfigError, match="SUPABASE_URL and SUPABASE_KEY"):
        download_uploads("supabase://uploads/acme/week12", tmp_path / "out")
    monkeypatch.setenv("SUPABASE_URL", fake.url)
    monkeypatch.setenv("SUPABASE_KEY", fake.key)
    paths = download_uploads("supabase://uploads/acme/week11", tmp_path / "env")
    assert [p.read_bytes() for p in paths] == [b"other,week\n1,2\n"]
