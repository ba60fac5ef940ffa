"""Issue 25 item 1: download faults against a local server on 127.0.0.1 (and extraction faults)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import stat
import tarfile
import threading
import time
from pathlib import Path

import pytest

from hapref.data.download import download, extract

PAYLOAD = bytes(range(256)) * 800  # 204,800 bytes
SHA = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.payload``; ``server.mode`` picks a fault:

    ``partial_without_range``: 206 with ``bytes 0-(n-2)/n`` to every request (one byte short, no Range asked);
    ``long_content_length``: a resumed 206 whose Content-Length exceeds its Content-Range;
    ``reset``: 200 with the full Content-Length, then ``server.cut_at`` bytes and a reset;
    ``stall``: ``server.cut_at`` bytes, then silence; ``trickle``: 256 bytes every 0.1 s (2.5 kB/s).
    """

    protocol_version = "HTTP/1.0"

    def do_GET(self):  # noqa: N802
        server, payload = self.server, self.server.payload
        server.ranges.append(self.headers.get("Range"))
        mode, n = server.mode, len(payload)
        if mode == "partial_without_range":
            self.send_response(206)
            self.send_header("Content-Range", f"bytes 0-{n - 2}/{n}")
            self.send_header("Content-Length", str(n - 1))
            self.end_headers()
            self.wfile.write(payload[:n - 1])
            return
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{n - 1}/{n}")
        else:
            self.send_response(200)
        body = payload[start:]
        length = len(body) + (100 if mode == "long_content_length" and start else 0)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if mode in ("reset", "stall") and not start:
            self.wfile.write(body[:server.cut_at])
            self.wfile.flush()
            if mode == "stall":
                server.release.wait(10)
            self.connection.shutdown(2)
            return
        if mode == "trickle":
            for i in range(0, len(body), 256):
                if server.release.is_set():
                    return
                self.wfile.write(body[i:i + 256])
                self.wfile.flush()
                time.sleep(0.1)
            return
        self.wfile.write(body)
        if mode == "long_content_length" and start:
            self.wfile.write(b"\0" * 100)  # bytes past the Content-Range: must not be stored

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.payload, httpd.ranges, httpd.mode, httpd.cut_at = PAYLOAD, [], "", 150_000
    httpd.release = threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.release.set()
    httpd.shutdown()
    httpd.server_close()


def _url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/features.hdf5"


def test_a_206_to_a_request_without_range_is_refused(server, tmp_path):
    """The issue's case: a body one short of the Content-Range total, answered 206 to a plain GET."""
    server.mode = "partial_without_range"
    with pytest.raises(ConnectionError, match="206 Partial Content .* to a request without Range"):
        download(_url(server), tmp_path / "f.hdf5", progress=False)
    assert not (tmp_path / "f.hdf5").exists() and not (tmp_path / "f.hdf5.part").exists()
    assert server.ranges == [None]


def test_a_resumed_body_is_as_long_as_its_content_range(server, tmp_path):
    (tmp_path / "f.hdf5.part").write_bytes(PAYLOAD[:1000])
    (tmp_path / "f.hdf5.part.json").write_text(json.dumps({"url": _url(server), "total": len(PAYLOAD)}))
    server.mode = "long_content_length"
    dest = download(_url(server), tmp_path / "f.hdf5", progress=False)
    assert server.ranges == ["bytes=1000-"]
    assert dest.read_bytes() == PAYLOAD


@pytest.mark.parametrize("mode", ["reset", "stall"])
def test_bytes_received_before_a_reset_or_stall_are_kept(server, tmp_path, mode):
    server.mode = mode
    with pytest.raises(ConnectionError, match="is kept and the next call resumes it"):
        download(_url(server), tmp_path / "f.hdf5", progress=False, timeout=0.5)
    part = tmp_path / "f.hdf5.part"
    assert part.stat().st_size == server.cut_at  # nothing of what arrived was dropped
    assert part.read_bytes() == PAYLOAD[:server.cut_at]
    server.mode, server.ranges[:] = "", []
    server.release.set()
    dest = download(_url(server), tmp_path / "f.hdf5", progress=False)
    assert server.ranges == [f"bytes={server.cut_at}-"] and dest.read_bytes() == PAYLOAD


def test_a_trickle_is_cut_by_the_stall_timeout(server, tmp_path):
    server.mode = "trickle"  # 2.5 kB/s: every single read succeeds within the per-read timeout
    begin = time.monotonic()
    with pytest.raises(ConnectionError, match=r"less than 10000 B/s.*is kept"):
        download(_url(server), tmp_path / "f.hdf5", progress=False, timeout=5, stall_timeout=0.5, min_rate=10_000)
    assert time.monotonic() - begin < 5
    assert (tmp_path / "f.hdf5.part").stat().st_size > 0


def test_unpinned_download_records_an_unverified_hash(server, tmp_path):
    dest = download(_url(server), tmp_path / "f.hdf5", progress=False)
    record = json.loads((tmp_path / "f.hdf5.sha256.json").read_text())
    assert record["sha256"] == SHA and record["size"] == len(PAYLOAD)
    assert record["source"] == "first-download" and record["verified"] is False
    assert dest.read_bytes() == PAYLOAD


def test_cli_reports_connection_errors_without_a_traceback(server, tmp_path, monkeypatch, capsys):
    from hapref.data import registry
    from hapref.data.download import main
    server.mode = "reset"
    monkeypatch.setitem(registry.FEATURES, "dns", {"toy": registry.RemoteFile(_url(server), "toy.hdf5")})
    assert main(["features", "toy", "--source", "dns", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "error: toy: download of" in err and "Run the same command again to resume" in err
    assert "Traceback" not in err


def _tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_extracted_folders_follow_the_umask(tmp_path):
    archive = tmp_path / "a.tar"
    archive.write_bytes(_tar({"x/readme.txt": b"hi"}))
    old = os.umask(0o022)
    try:
        out = extract(archive, tmp_path / "out")
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


@pytest.mark.parametrize("compression", ["", "gz"])
def test_a_truncated_archive_is_named(tmp_path, compression):
    data = _tar({"x/a.bin": os.urandom(20_000), "x/b.bin": os.urandom(20_000)})
    if compression:
        import gzip
        data = gzip.compress(data)
    archive = tmp_path / f"a.tar{'.gz' if compression else ''}"
    archive.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=rf"archive {archive} is (truncated or corrupt|neither a tar nor a zip)"):
        extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == [archive.name]
