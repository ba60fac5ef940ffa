"""hapref.data.download: resumable verified downloads and safe extraction, offline (file:// and a local server)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from hapref.data.download import download, extract, sha256_file, verify

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.payload`` with Range/If-Range support and an ETag; misbehaviours switched on per test:
    ``cut`` (send half, hang up), ``no_length`` (no Content-Length), ``wrong_range`` (206 from byte 0 whatever
    was asked), ``ignore_if_range`` (206 even when the ETag changed)."""

    protocol_version = "HTTP/1.0"

    def do_GET(self):  # noqa: N802 (http.server API)
        server, payload = self.server, self.server.payload
        self.server.ranges.append(self.headers.get("Range"))
        start = 0
        etag = f'"{hashlib.sha256(payload).hexdigest()[:16]}"'
        if_range = self.headers.get("If-Range")
        if self.headers.get("Range") and (if_range in (None, etag) or server.ignore_if_range):
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
            if start >= len(payload):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(payload)}")
                self.end_headers()
                return
            if server.wrong_range:
                start = 0
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}")
        else:
            self.send_response(200)
        body = payload[start:]
        self.send_header("ETag", etag)
        if not server.no_length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if server.cut:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.payload, httpd.ranges = PAYLOAD, []
    httpd.cut = httpd.no_length = httpd.wrong_range = httpd.ignore_if_range = False
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/features.hdf5"


SHA = hashlib.sha256(PAYLOAD).hexdigest()


def test_download_verifies_and_records(server, tmp_path):
    dest = download(_url(server), tmp_path / "f.hdf5", sha256=SHA, size=len(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD and not (tmp_path / "f.hdf5.part").exists()
    record = json.loads((tmp_path / "f.hdf5.sha256.json").read_text())
    assert record["sha256"] == SHA and record["size"] == len(PAYLOAD) and record["source"] == "official"
    server.ranges.clear()
    download(_url(server), dest, sha256=SHA, progress=False)  # present and valid: no request at all
    assert server.ranges == []


def test_checksum_mismatch_leaves_nothing(server, tmp_path):
    with pytest.raises(ValueError, match="sha256"):
        download(_url(server), tmp_path / "f.hdf5", sha256="0" * 64, progress=False)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="size"):
        download(_url(server), tmp_path / "g.hdf5", size=len(PAYLOAD) + 1, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_interrupted_download_resumes_with_range(server, tmp_path):
    dest = tmp_path / "f.hdf5"
    server.cut = True
    with pytest.raises(ConnectionError, match="resumes"):
        download(_url(server), dest, sha256=SHA, progress=False)
    part = tmp_path / "f.hdf5.part"
    assert not dest.exists() and 0 < part.stat().st_size < len(PAYLOAD)
    done = part.stat().st_size
    server.cut = False
    download(_url(server), dest, sha256=SHA, progress=False)
    assert server.ranges[-1] == f"bytes={done}-"
    assert dest.read_bytes() == PAYLOAD and not part.exists()


def test_complete_part_file_is_finished_without_refetching(server, tmp_path):
    (tmp_path / "f.hdf5.part").write_bytes(PAYLOAD)
    dest = download(_url(server), tmp_path / "f.hdf5", sha256=SHA, size=len(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD and server.ranges == []


def test_source_without_range_support_restarts_the_part(tmp_path):
    source = tmp_path / "remote.bin"
    source.write_bytes(PAYLOAD)
    (tmp_path / "file.bin.part").write_bytes(b"stale bytes from another attempt")
    dest = download(source.as_uri(), tmp_path / "file.bin", sha256=SHA, progress=False)  # file:// ignores Range
    assert dest.read_bytes() == PAYLOAD


def test_without_checksum_a_download_is_complete_only_at_the_announced_size(server, tmp_path):
    dest = tmp_path / "f.hdf5"
    server.cut = True
    with pytest.raises(ConnectionError, match="127.0.0.1"):
        download(_url(server), dest, progress=False)
    assert not dest.exists()
    server.cut = False
    assert download(_url(server), dest, progress=False).read_bytes() == PAYLOAD


def test_early_close_without_content_length_is_never_final(server, tmp_path):
    server.cut = server.no_length = True
    with pytest.raises(ValueError, match=f"{_url(server)}.*no size"):
        download(_url(server), tmp_path / "f.hdf5", progress=False)
    assert list(tmp_path.iterdir()) == []
    server.cut = False  # a complete body without Content-Length is still unverifiable without a checksum
    with pytest.raises(ValueError, match="truncated"):
        download(_url(server), tmp_path / "f.hdf5", progress=False)
    assert download(_url(server), tmp_path / "f.hdf5", sha256=SHA, progress=False).read_bytes() == PAYLOAD


def test_stale_part_longer_than_the_file_restarts(server, tmp_path):
    dest = tmp_path / "f.hdf5"
    server.cut = True
    with pytest.raises(ConnectionError):
        download(_url(server), dest, progress=False)
    server.cut = False
    with open(tmp_path / "f.hdf5.part", "ab") as f:
        f.write(b"x" * len(PAYLOAD))  # now longer than the file: the server answers 416
    assert download(_url(server), dest, progress=False).read_bytes() == PAYLOAD
    assert server.ranges[-1] is None  # restarted from byte 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.hdf5", "f.hdf5.sha256.json"]


def test_206_with_the_wrong_range_is_not_appended(server, tmp_path):
    dest = tmp_path / "f.hdf5"
    server.cut = True
    with pytest.raises(ConnectionError):
        download(_url(server), dest, progress=False)
    server.cut, server.wrong_range = False, True
    assert download(_url(server), dest, progress=False).read_bytes() == PAYLOAD


@pytest.mark.parametrize("ignore_if_range", [False, True])
def test_file_changed_between_resumes_is_fetched_whole(server, tmp_path, ignore_if_range):
    dest = tmp_path / "f.hdf5"
    server.cut = True
    with pytest.raises(ConnectionError):
        download(_url(server), dest, progress=False)
    changed = bytes(reversed(PAYLOAD)) + b"new tail"
    server.cut, server.payload, server.ignore_if_range = False, changed, ignore_if_range
    assert download(_url(server), dest, progress=False).read_bytes() == changed


def test_unrelated_file_at_the_destination_is_refused(server, tmp_path):
    dest = tmp_path / "f.hdf5"
    dest.write_bytes(b"my own file")
    with pytest.raises(ValueError, match=f"did not download.*{_url(server)}"):
        download(_url(server), dest, progress=False)
    assert dest.read_bytes() == b"my own file" and server.ranges == []
    with pytest.raises(ValueError, match=f"sha256.*{_url(server)}"):
        download(_url(server), dest, sha256=SHA, progress=False)


def test_http_errors_name_the_url(server, tmp_path):
    url = f"http://127.0.0.1:{server.server_address[1]}/missing"
    server.payload = b""

    class NotFound(_Handler):
        def do_GET(self):  # noqa: N802
            self.send_error(404)

    server.RequestHandlerClass = NotFound
    with pytest.raises(ConnectionError, match=f"{url}.*404"):
        download(url, tmp_path / "f.bin", progress=False)


def test_registry_pins_every_annotation_file():
    from hapref.data.registry import ANNOTATIONS
    for files in ANNOTATIONS.values():
        for f in files:
            assert len(f.sha256) == 64 and int(f.sha256, 16) >= 0 and f.size > 0, f.filename
    real = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if (real / "README.md").exists():  # the table of the shared copy lists the same checksums
        table = (real / "README.md").read_text()
        for name, files in ANNOTATIONS.items():
            for f in files:
                assert f"| {name}/{f.filename} | {f.sha256} | {f.size} |" in table
                path = real / "annotations" / name / f.filename
                if path.exists():
                    assert path.stat().st_size == f.size and sha256_file(path) == f.sha256


def test_fetch_refuses_bytes_other_than_the_pinned_ones(tmp_path):
    from hapref.data.download import fetch
    from hapref.data.registry import RemoteFile
    remote = tmp_path / "fivr.pickle"
    remote.write_bytes(b"tampered")
    pinned = RemoteFile(remote.as_uri(), "fivr.pickle", "0" * 64, 8)
    with pytest.raises(ValueError, match=f"sha256.*{remote.as_uri()}"):
        fetch([pinned], tmp_path / "out", progress=False)
    assert list((tmp_path / "out").iterdir()) == []


def test_first_download_checksum_is_recorded_then_enforced(tmp_path):
    source = tmp_path / "remote.bin"
    source.write_bytes(PAYLOAD)
    dest = download(source.as_uri(), tmp_path / "local" / "file.bin", progress=False)
    record = json.loads((tmp_path / "local" / "file.bin.sha256.json").read_text())
    assert record["source"] == "first-download" and record["sha256"] == sha256_file(source) == SHA
    dest.write_bytes(PAYLOAD[:-1] + b"x")  # corrupted later
    with pytest.raises(ValueError, match="first download"):
        download(source.as_uri(), dest, progress=False)
    with pytest.raises(ValueError, match="sha256"):
        verify(dest)


def _tar(tmp_path, entries) -> str:
    path = tmp_path / "a.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, kind in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = name.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                link = (tarfile.SYMTYPE, "/etc/passwd") if kind == "symlink" else (tarfile.LNKTYPE, "x")
                info.type, info.linkname = link
                tar.addfile(info)
    return path


def test_extract_tar_and_zip(tmp_path):
    out = extract(_tar(tmp_path, [("d/a.txt", "file"), ("b.txt", "file")]), tmp_path / "out")
    assert (out / "d" / "a.txt").read_text() == "d/a.txt" and (out / "b.txt").exists()
    zpath = tmp_path / "a.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("x/y.txt", "y")
    assert (extract(zpath, tmp_path / "zout") / "x" / "y.txt").read_text() == "y"


@pytest.mark.parametrize("entries", [
    [("ok.txt", "file"), ("../evil.txt", "file")],
    [("/abs/evil.txt", "file")],
    [("ok.txt", "file"), ("link", "symlink")],
    [("hard", "hardlink")],
])
def test_extract_rejects_unsafe_tar(tmp_path, entries):
    with pytest.raises(ValueError, match="archive member"):
        extract(_tar(tmp_path, entries), tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "evil.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz"]  # no temporary folder left behind


def test_extract_rejects_unsafe_zip(tmp_path):
    zpath = tmp_path / "a.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("../../evil.txt", "boom")
    with pytest.raises(ValueError, match="archive member"):
        extract(zpath, tmp_path / "out")
    link = tmp_path / "b.zip"
    with zipfile.ZipFile(link, "w") as z:
        info = zipfile.ZipInfo("link")
        info.external_attr = (0o120777 << 16)
        z.writestr(info, "/etc/passwd")
    with pytest.raises(ValueError, match="link"):
        extract(link, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    plain = tmp_path / "notes.txt"
    plain.write_text("not an archive")
    with pytest.raises(ValueError, match="neither"):
        extract(plain, tmp_path / "out")


def _script(name: str):
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "data_scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"data_scripts_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_download_script_lists_and_validates(capsys):
    script = _script("download")
    assert script.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "fivr" in out and "mever.iti.gr" not in out and "fvl.fudan.edu.cn" in out
    with pytest.raises(SystemExit):
        script.main(["annotations", "no_such_dataset"])


def test_prepare_frames_script(tmp_path):
    from hapref.data import FramesDirectory
    from hapref.data.sources import clip_path
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "carphone.mp4").write_bytes(clip_path("carphone").read_bytes())  # 120 frames at 29.97 fps
    assert _script("prepare_frames").main([str(videos), str(tmp_path / "out"), "--short-side", "32", "--square"]) == 0
    frames = FramesDirectory(tmp_path / "out")
    assert frames.ids == ["carphone"] and frames[0]["frames"].shape == (4, 32, 32, 3)  # 1 fps over 4 s


def test_registry_pins_annotation_files_to_commits():
    import re
    from hapref.data.registry import ANNOTATIONS, FEATURES
    for files in ANNOTATIONS.values():
        for f in files:
            assert re.fullmatch(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/.+", f.url), f.url
    names = [f.filename for files in ANNOTATIONS.values() for f in files]
    assert len(names) == len(set(names))
    assert all(f.url.startswith("https://") and f.filename.endswith(".hdf5")
               for files in FEATURES.values() for f in files.values())


def test_the_packaged_downloader_runs_as_a_module():
    """``python -m hapref.data.download`` is the CLI (the wheel ships no data_scripts/): help, list, bad names."""
    import subprocess
    import sys

    help_text = subprocess.run([sys.executable, "-m", "hapref.data.download", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert "python -m hapref.data.download annotations" in help_text
    listed = subprocess.run([sys.executable, "-m", "hapref.data.download", "list"], capture_output=True, text=True,
                            check=True).stdout
    assert listed.startswith("annotations: ")
    bad = subprocess.run([sys.executable, "-m", "hapref.data.download", "annotations", "nope"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "datasets must be some of" in bad.stderr
