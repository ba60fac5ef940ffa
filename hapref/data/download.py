"""Resumable, verified downloads and safe archive extraction for the real datasets (used by ``data_scripts/``).

* :func:`download` streams into ``<file>.part`` and resumes it with HTTP ``Range`` + ``If-Range`` requests; only a
  complete, verified file is moved into place (``os.replace``), so a partial file never sits under the final name.
* Complete means: the size the server announced (or the registry's size) and, where known, the SHA-256. A part
  longer than the file, a 206 response for other bytes than asked, or a file that changed between resumes
  restarts from byte 0; a download with neither an announced size nor a known checksum is refused. A resumed
  (206) body is as long as its ``Content-Range`` says; a 206 to a request without ``Range`` is refused (a
  part is never stored as the whole file).
* Every network read (at most 64 KiB) is written and flushed as it arrives, so a stall or a reset keeps the
  bytes received; besides the per-read ``timeout``, a download slower than ``min_rate`` over ``stall_timeout``
  seconds is stopped (the part kept for the next call).
* Checksums: the registry pins the SHA-256 and size of every annotation file. Where none is published (feature
  files) the download is **unverified**: it is checked only against the size the server announced, and the
  SHA-256 of the first complete download is recorded next to the file (``<file>.sha256.json``,
  ``"source": "first-download"``, ``"verified": false``) so that later calls detect a change; a file at the
  destination that hapref did not download is refused, not adopted.
* :func:`extract` unpacks tar/zip archives into a temporary folder and renames it into place (with the mode
  ``mkdir`` would give), refusing absolute paths, ``..`` components, links and special files, and naming a
  truncated or corrupt archive.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import lzma
import os
import re
import shutil
import stat
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from hapref.data.registry import ANNOTATIONS, FEATURES, VIDEO_SOURCES, RemoteFile
from hapref.files import atomic_write_bytes

_CHUNK = 1 << 20
_READ = 1 << 16  # network reads: at most 64 KiB, written and flushed as they arrive


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks.

    Examples:
        >>> import tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = pathlib.Path(d) / "x"
        ...     _ = path.write_bytes(b"abc")
        ...     print(sha256_file(path)[:16])
        ba7816bf8f01cfea
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _record_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".sha256.json")


def verify(path: str | os.PathLike, sha256: str | None = None, size: int | None = None) -> str:
    """Check ``path`` against ``sha256``/``size``, or against its recorded checksum; return its SHA-256.

    Raises ValueError on a mismatch. Without an expected or recorded checksum nothing can be compared: the
    file's SHA-256 is returned (and :func:`download` records it).

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = path.write_bytes(b"hello\\n")
        >>> verify(path, size=6)
        '5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03'
        >>> verify(path, sha256="0" * 64)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: .../a.txt has SHA-256 5891b5b5..., expected sha256 000...
    """
    path = Path(path)
    if size is not None and path.stat().st_size != size:
        raise ValueError(f"{path} has {path.stat().st_size} bytes, expected size {size}")
    digest = sha256_file(path)
    record = _record_path(path)
    expected = sha256 or (json.loads(record.read_text())["sha256"] if record.exists() else None)
    if expected is not None and digest != expected.lower():
        raise ValueError(f"{path} has SHA-256 {digest}, expected sha256 {expected}"
                         + ("" if sha256 else f" (recorded in {record.name} at its first download)"))
    return digest


def _open(url: str, start: int, timeout: float, validator: str | None = None):
    request = urllib.request.Request(url, headers={"User-Agent": "hapref-data/1"})
    if start > 0 and url.startswith(("http://", "https://")):
        request.add_header("Range", f"bytes={start}-")
        if validator:
            request.add_header("If-Range", validator)  # the server sends the whole file if it changed
    return urllib.request.urlopen(request, timeout=timeout)


class _Restart(Exception):
    """The partial file cannot be continued (wrong range, file changed, stale part): start again from 0."""


_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def _content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """(first byte, last byte, total or None) of a ``Content-Range: bytes a-b/total`` header, None if absent or
    unparsable (or inconsistent: b < a, or b beyond the total)."""
    match = _CONTENT_RANGE.fullmatch((value or "").strip())
    if match is None:
        return None
    first, last, total = int(match[1]), int(match[2]), None if match[3] == "*" else int(match[3])
    if last < first or (total is not None and last >= total):
        return None
    return first, last, total


def _meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _read_meta(part: Path) -> dict:
    try:
        meta = json.loads(_meta_path(part).read_text())
        return meta if isinstance(meta, dict) else {}
    except (OSError, ValueError):
        return {}


def _drop(part: Path) -> None:
    part.unlink(missing_ok=True)
    _meta_path(part).unlink(missing_ok=True)


def _fetch(url: str, part: Path, start: int, meta: dict, dest_name: str, progress: bool, timeout: float,
           stall_timeout: float = 60.0, min_rate: float = 10_000.0) -> int | None:
    """Append the rest of ``url`` to ``part`` (from byte ``start``); returns the server's announced total size.

    Every read (at most 64 KiB) is written and flushed at once, so a stall or reset keeps what arrived. A window
    of ``stall_timeout`` seconds that brings fewer than ``min_rate · stall_timeout`` bytes ends the download
    (``ConnectionError``, the part kept), however slowly the bytes keep trickling in.
    """
    validator = meta.get("etag") or meta.get("last_modified")
    try:
        response = _open(url, start, timeout, validator)
    except urllib.error.HTTPError as err:
        if err.code == 416 and start > 0:  # the part is at least as long as the file
            match = re.fullmatch(r"bytes\s+\*/(\d+)", (err.headers.get("Content-Range") or "").strip())
            if match is not None and int(match[1]) == start == meta.get("total"):
                return start  # exactly complete
            raise _Restart from None
        raise ConnectionError(f"download of {url} failed: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        raise ConnectionError(f"download of {url} failed: {getattr(err, 'reason', err)}") from None
    with response:
        status = response.getcode() or 200
        length = response.headers.get("Content-Length")
        etag, modified = response.headers.get("ETag"), response.headers.get("Last-Modified")
        body_length = int(length) if length is not None else None
        if status == 206 and start == 0:  # no Range was sent: a part must never be stored as the whole file
            raise ConnectionError(f"download of {url} failed: the server answered 206 Partial Content (Content-Range "
                                  f"{response.headers.get('Content-Range')!r}) to a request without Range; "
                                  "nothing was stored")
        if start > 0 and status == 206:
            content_range = _content_range(response.headers.get("Content-Range"))
            if content_range is None or content_range[0] != start:
                raise _Restart  # a 206 with other bytes than the ones asked for
            total = content_range[2]
            body_length = content_range[1] - content_range[0] + 1  # Content-Range, not Content-Length, rules
            changed = (meta.get("total") is not None and total is not None and total != meta["total"]) or (
                meta.get("etag") and etag and etag != meta["etag"])
            if changed:
                raise _Restart  # the file changed since the part was started
            mode = "ab"
        else:  # the whole file: no Range sent, Range not supported, or If-Range found the file changed
            start, mode = 0, "wb"
            total = int(length) if length is not None else None
        atomic_write_bytes(_meta_path(part), json.dumps(
            {"url": url, "etag": etag or meta.get("etag") if mode == "ab" else etag,
             "last_modified": modified, "total": total}).encode())
        received = 0
        from tqdm.auto import tqdm
        read = getattr(response, "read1", response.read)  # read1: what has arrived, without waiting for more
        try:
            with open(part, mode) as f, tqdm(total=total, initial=start, unit="B", unit_scale=True, desc=dest_name,
                                             disable=not progress) as bar:
                window_start, window_bytes = time.monotonic(), 0
                while True:
                    want = _READ if body_length is None else min(_READ, body_length - received)
                    block = read(want) if want > 0 else b""
                    if not block:
                        break
                    f.write(block)
                    f.flush()
                    received += len(block)
                    window_bytes += len(block)
                    bar.update(len(block))
                    elapsed = time.monotonic() - window_start
                    if elapsed >= stall_timeout:
                        if window_bytes < min_rate * elapsed:
                            raise _Stalled(f"{window_bytes} bytes in the last {elapsed:.1f} s (less than "
                                           f"{min_rate:g} B/s)")
                        window_start, window_bytes = time.monotonic(), 0
        except (OSError, http.client.HTTPException, _Stalled) as err:
            raise ConnectionError(f"download of {url} stopped after {start + received} bytes ({err}); "
                                  f"{part.name} is kept and the next call resumes it") from None
    if body_length is not None and received < body_length:
        raise ConnectionError(f"download of {url} stopped after {received} of {body_length} bytes; "
                              f"{part.name} is kept and the next call resumes it")
    return total


class _Stalled(Exception):
    """Fewer bytes than the minimum rate arrived within the stall window."""


def download(url: str, dest: str | os.PathLike, sha256: str | None = None, size: int | None = None,
             progress: bool = True, timeout: float = 60.0, stall_timeout: float = 60.0,
             min_rate: float = 10_000.0) -> Path:
    """Download ``url`` to ``dest`` (resuming ``dest.part``), verify it, then move it into place. Returns ``dest``.

    A download becomes ``dest`` only when complete and verified: its SHA-256 and size equal ``sha256`` /
    ``size`` where given, and its size equals the total the server announced (``Content-Length`` of a full
    response, ``Content-Range`` of a resumed one). A resume asks for the missing bytes with ``Range`` and
    ``If-Range`` (the ETag or Last-Modified of the first response); a part longer than the file, a 206 with
    other bytes than asked, or a file that changed meanwhile restarts the download from byte 0. Without an
    announced total and without ``size``/``sha256`` nothing can tell a complete file from a truncated one:
    the download is refused. An existing ``dest`` is verified against ``sha256``/``size`` or its recorded
    checksum; a file hapref did not download (no record, no checksum) is refused, never adopted.

    Args:
        url: ``http(s)://`` or ``file://`` address.
        dest: final path; ``<dest>.part`` (+ ``.part.json``) hold an unfinished download.
        sha256, size: the published checksum and size, when known.
        progress: show a tqdm bar.
        timeout: seconds per network operation.
        stall_timeout, min_rate: a download that brings fewer than ``min_rate`` bytes/s over a window of
            ``stall_timeout`` seconds is stopped (``ConnectionError``; the bytes received are kept and resumed).

    Returns:
        ``dest``.

    Raises:
        ValueError: checksum/size mismatch (the bytes are deleted), an unverifiable download, or an
            unrelated file at ``dest``; the message names the URL.
        ConnectionError: network failure or early end; ``dest.part`` is kept so the next call resumes.

    Examples:
        >>> import hashlib, pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "remote.bin").write_bytes(b"payload")
        >>> digest = hashlib.sha256(b"payload").hexdigest()
        >>> download((folder / "remote.bin").as_uri(), folder / "local.bin", sha256=digest, progress=False).name
        'local.bin'
    """
    dest = Path(dest)
    if dest.exists():
        return _check_existing(url, dest, sha256, size)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    meta = _read_meta(part) if part.exists() else {}
    # keep a part only if it was started from this URL (or, without a record, when a checksum will judge it)
    if part.exists() and (meta.get("url", url if sha256 else None) != url
                          or (size is not None and part.stat().st_size > size)):
        _drop(part)
        meta = {}
    for _ in range(2):
        start = part.stat().st_size if part.exists() else 0
        if size is not None and start == size:
            total = size  # finished earlier, verified below
            break
        try:
            total = _fetch(url, part, start, meta, dest.name, progress, timeout, stall_timeout, min_rate)
            break
        except _Restart:
            _drop(part)
            meta = {}
    else:  # pragma: no cover - a restart from byte 0 sends no Range, so it cannot ask for a restart again
        raise ConnectionError(f"download of {url} could not be restarted")
    actual = part.stat().st_size if part.exists() else 0
    expected = size if size is not None else total
    try:
        if expected is None and sha256 is None:
            raise ValueError(f"download of {url}: the server announced no size and no checksum is known, so a "
                             "complete file cannot be told from a truncated one; refusing it")
        if expected is not None and total is not None and expected != total:
            raise ValueError(f"download of {url}: the server announced {total} bytes, expected size {expected}")
        if expected is not None and actual != expected:
            raise ValueError(f"download of {url} has {actual} bytes, expected size {expected}")
        digest = verify(part, sha256, size)
    except ValueError as err:
        _drop(part)
        raise ValueError(f"{err} (from {url}; nothing was kept)") from None
    os.replace(part, dest)
    _meta_path(part).unlink(missing_ok=True)
    _write_record(dest, url, digest, "official" if sha256 else "first-download")
    return dest


def _check_existing(url: str, dest: Path, sha256: str | None, size: int | None) -> Path:
    """Verify a file already at ``dest``; adopt it only against a known or recorded checksum."""
    record = _record_path(dest)
    if sha256 is None and not record.exists():
        raise ValueError(f"{dest} exists but hapref did not download it (no {record.name}) and no checksum is "
                         f"known for {url}: remove it to download it, or pass sha256")
    if sha256 is None:
        recorded_url = json.loads(record.read_text()).get("url")
        if recorded_url not in (None, url):
            raise ValueError(f"{dest} was downloaded from {recorded_url}, not {url}; remove it to download again")
    try:
        digest = verify(dest, sha256, size)
    except ValueError as err:
        raise ValueError(f"{err} (expected the file of {url})") from None
    if not record.exists():
        _write_record(dest, url, digest, "official")
    return dest


def _write_record(dest: Path, url: str, digest: str, source: str) -> None:
    record = {"file": dest.name, "url": url, "size": dest.stat().st_size, "sha256": digest, "source": source,
              "verified": source == "official"}  # first-download: only the announced size was checked
    atomic_write_bytes(_record_path(dest), (json.dumps(record, indent=1) + "\n").encode())


def _check_member_name(name: str) -> None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ValueError(f"archive member {name!r} has an absolute path")
    if ".." in path.parts:
        raise ValueError(f"archive member {name!r} leaves the target folder ('..')")


def _safe_members(archive: tarfile.TarFile | zipfile.ZipFile) -> None:
    """Raise ValueError unless every member is a plain file or folder inside the target folder."""
    if isinstance(archive, tarfile.TarFile):
        for member in archive.getmembers():
            _check_member_name(member.name)
            if not (member.isfile() or member.isdir()):
                raise ValueError(f"archive member {member.name!r} is a link or special file; refusing to extract")
    else:
        for info in archive.infolist():
            _check_member_name(info.filename)
            kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the archiver stored no file type
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise ValueError(f"archive member {info.filename!r} is a link or special file; refusing to extract")


def extract(archive: str | os.PathLike, dest_dir: str | os.PathLike) -> Path:
    """Safely extract a tar (any compression) or zip ``archive`` into ``dest_dir``; returns ``dest_dir``.

    Everything is checked before anything is written; extraction goes to a temporary sibling folder that
    is renamed to ``dest_dir`` at the end, so ``dest_dir`` exists only when complete. An existing
    ``dest_dir`` is returned unchanged. ``dest_dir`` gets the mode of a folder made with ``mkdir`` (0777 less the
    umask), not the temporary folder's 0700. A truncated or corrupt archive is a ``ValueError`` naming it.

    Examples:
        >>> import tempfile, zipfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> with zipfile.ZipFile(folder / "a.zip", "w") as archive:
        ...     archive.writestr("x/readme.txt", "hi")
        >>> out = extract(folder / "a.zip", folder / "out")
        >>> sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
        ['x', 'x/readme.txt']
    """
    archive, dest_dir = Path(archive), Path(dest_dir)
    if dest_dir.exists():
        return dest_dir
    try:
        if tarfile.is_tarfile(archive):
            opened: tarfile.TarFile | zipfile.ZipFile = tarfile.open(archive)
        elif zipfile.is_zipfile(archive):
            opened = zipfile.ZipFile(archive)
        else:
            raise ValueError(f"archive {archive} is neither a tar nor a zip file")
    except _CORRUPT as err:
        raise _corrupt(archive, err) from None
    dest_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest_dir.parent, prefix=f".{dest_dir.name}.", suffix=".tmp"))
    try:
        with opened:
            try:
                _safe_members(opened)
                if isinstance(opened, tarfile.TarFile) and hasattr(tarfile, "data_filter"):
                    opened.extractall(tmp, filter="data")
                else:
                    opened.extractall(tmp)
            except _CORRUPT as err:
                raise _corrupt(archive, err) from None
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp made it 0700
        os.replace(tmp, dest_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest_dir


#: What a truncated or corrupt archive raises while it is read.
_CORRUPT = (tarfile.ReadError, tarfile.CompressionError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError)


def _corrupt(archive: Path, err: BaseException) -> ValueError:
    return ValueError(f"archive {archive} is truncated or corrupt ({type(err).__name__}: {err}); nothing was "
                      "extracted: delete it and download it again")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fetch(files: Iterable[RemoteFile], folder: str | os.PathLike, progress: bool = True,
          ) -> list[Path]:
    """Download (resuming, verifying against ``sha256``/``size`` where pinned) each file into ``folder``.

    ``files`` are :class:`hapref.data.registry.RemoteFile` entries (``url``, ``filename``, ``sha256``, ``size``).
    Returns the paths; see :func:`download` for what is refused.

    Examples:
        >>> import hashlib, pathlib, tempfile
        >>> from hapref.data.registry import RemoteFile
        >>> remote = pathlib.Path(tempfile.mkdtemp()) / "ids.txt"
        >>> _ = remote.write_bytes(b"a\\nb\\n")
        >>> pinned = RemoteFile(remote.as_uri(), "ids.txt", hashlib.sha256(b"a\\nb\\n").hexdigest(), 4)
        >>> [p.name for p in fetch([pinned], remote.parent / "out", progress=False)]
        ['ids.txt']
    """
    return [download(f.url, Path(folder) / f.filename, sha256=f.sha256, size=f.size, progress=progress)
            for f in files]


USAGE = """Fetch the real benchmarks' annotation and feature files (resumable, checksum-recorded).

    python -m hapref.data.download list
    python -m hapref.data.download annotations fivr evve --root ~/data/hapref   # then evaluate with --root
    python -m hapref.data.download features fivr_5k --source dns --root ~/data/hapref
"""


def main(argv: list[str] | None = None) -> int:
    """``python -m hapref.data.download``: list the real datasets, or fetch annotation / feature files.

    Examples:
        >>> main(["list"])  # doctest: +ELLIPSIS
        annotations: ...
        0
    """
    import argparse
    import sys

    from hapref.data.cache import annotation_root, data_root

    parser = argparse.ArgumentParser(prog="python -m hapref.data.download", description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["list", "annotations", "features"])
    parser.add_argument("datasets", nargs="*", help="dataset names (see `list`)")
    parser.add_argument("--source", choices=sorted(FEATURES), default="dns", help="who extracted the features")
    parser.add_argument("--root", type=Path, default=None,
                        help="data folder (annotations: default $HAPREF_ANNOTATIONS, else ~/.cache/hapref; "
                             "features: default $HAPREF_DATA, else ~/.cache/hapref)")
    args = parser.parse_args(argv)
    root = annotation_root(args.root) if args.what == "annotations" else data_root(args.root)

    if args.what == "list":
        print("annotations:", ", ".join(sorted(ANNOTATIONS)))
        for source, files in sorted(FEATURES.items()):
            print(f"features --source {source}:",
                  ", ".join(f"{n} ({f.approx_size})" if f.approx_size else n for n, f in sorted(files.items())))
        print("videos (by hand):")
        for name, where in sorted(VIDEO_SOURCES.items()):
            print(f"  {name}: {where}")
        return 0
    table = ANNOTATIONS if args.what == "annotations" else FEATURES[args.source]
    unknown = sorted(set(args.datasets) - set(table))
    if unknown or not args.datasets:
        parser.error(f"datasets must be some of {sorted(table)}, got {args.datasets}")
    for name in args.datasets:
        files = table[name] if args.what == "annotations" else (table[name],)
        folder = root / ("annotations" if args.what == "annotations" else f"features_{args.source}") / name
        try:
            for path in fetch(files, folder):
                print(f"{name}: {path}")
        except ConnectionError as err:  # network failure, stall or early end: the part is kept
            print(f"error: {name}: {err}\nRun the same command again to resume.", file=sys.stderr)
            return 1
        except (ValueError, OSError) as err:  # checksum/size mismatch, unrelated file, bad archive, disk
            print(f"error: {name}: {err}", file=sys.stderr)
            return 1
    if args.what == "annotations":
        print(f"Every file matched its pinned SHA-256 and size. Evaluate with: python -m hapref.evaluation DATASET "
              f"--similarities FILE --root {root}")
    else:
        print("UNVERIFIED: no official checksums are published for feature files. Each was checked only against "
              "the size the server announced; its SHA-256 is recorded in <file>.sha256.json (\"verified\": false) "
              "and checked on later runs.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
