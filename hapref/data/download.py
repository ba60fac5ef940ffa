"""Resumable, verified downloads and safe archive extraction for the real datasets (used by ``data_scripts/``).

* :func:`download` streams into ``<file>.part`` and resumes it with an HTTP ``Range`` request; only a complete,
  verified file is moved into place (``os.replace``), so a partial file never sits under the final name.
* Checksums: with a known SHA-256 the file must match it. Where no official checksum is published, the size
  (if known) is checked and the SHA-256 of the first download is recorded next to the file
  (``<file>.sha256.json``, ``"source": "first-download"``); later calls verify against that record.
* :func:`extract` unpacks tar/zip archives into a temporary folder and renames it into place, refusing
  absolute paths, ``..`` components, links and special files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from hapref.files import atomic_write_bytes

_CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
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


def _open(url: str, start: int, timeout: float):
    request = urllib.request.Request(url, headers={"User-Agent": "hapref-data/1"})
    if start > 0 and url.startswith(("http://", "https://")):
        request.add_header("Range", f"bytes={start}-")
    return urllib.request.urlopen(request, timeout=timeout)


def download(url: str, dest: str | os.PathLike, sha256: str | None = None, size: int | None = None,
             progress: bool = True, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` (resuming ``dest.part``), verify it, then move it into place. Returns ``dest``.

    An existing ``dest`` is verified instead of downloaded again. On a checksum or size mismatch the
    downloaded bytes are deleted and ValueError is raised; on a network error ``dest.part`` is kept so the
    next call resumes.
    """
    dest = Path(dest)
    if dest.exists():
        digest = verify(dest, sha256, size)
        if not _record_path(dest).exists():
            _write_record(dest, url, digest, "official" if sha256 else "first-download")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    start = part.stat().st_size if part.exists() else 0
    if size is not None and start > size:
        part.unlink()
        start = 0
    if size is None or start < size:
        try:
            response = _open(url, start, timeout)
        except urllib.error.HTTPError as err:
            if err.code != 416:  # 416: nothing left to fetch, the part is complete
                raise
            response = None
        if response is not None:
            with response:
                resumed = start > 0 and getattr(response, "status", 200) == 206
                announced = response.headers.get("Content-Length")
                received = 0
                from tqdm.auto import tqdm
                with open(part, "ab" if resumed else "wb") as f, tqdm(
                        total=int(announced) + (start if resumed else 0) if announced else size,
                        initial=start if resumed else 0, unit="B", unit_scale=True, desc=dest.name,
                        disable=not progress) as bar:
                    for block in iter(lambda: response.read(_CHUNK), b""):
                        f.write(block)
                        received += len(block)
                        bar.update(len(block))
            if announced is not None and received < int(announced):
                raise ConnectionError(f"download of {url} stopped after {received} of {announced} bytes; "
                                      f"{part.name} is kept and the next call resumes it")
    try:
        digest = verify(part, sha256, size)
    except ValueError:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, dest)
    _write_record(dest, url, digest, "official" if sha256 else "first-download")
    return dest


def _write_record(dest: Path, url: str, digest: str, source: str) -> None:
    record = {"file": dest.name, "url": url, "size": dest.stat().st_size, "sha256": digest, "source": source}
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
    ``dest_dir`` is returned unchanged.
    """
    archive, dest_dir = Path(archive), Path(dest_dir)
    if dest_dir.exists():
        return dest_dir
    if tarfile.is_tarfile(archive):
        opened: tarfile.TarFile | zipfile.ZipFile = tarfile.open(archive)
    elif zipfile.is_zipfile(archive):
        opened = zipfile.ZipFile(archive)
    else:
        raise ValueError(f"archive {archive} is neither a tar nor a zip file")
    dest_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest_dir.parent, prefix=f".{dest_dir.name}.", suffix=".tmp"))
    try:
        with opened:
            _safe_members(opened)
            if isinstance(opened, tarfile.TarFile) and hasattr(tarfile, "data_filter"):
                opened.extractall(tmp, filter="data")
            else:
                opened.extractall(tmp)
        os.replace(tmp, dest_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest_dir
