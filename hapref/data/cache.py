"""Where generated data lives and how it is written: a data directory, config-keyed names, atomic files."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

#: Bump whenever the bytes a generator produces for a given config change: old caches then stop matching.
FORMAT_VERSION = 4


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data directory: ``root`` if given, else ``$HAPREF_DATA``, else ``~/.cache/hapref``."""
    if root is None:
        root = os.environ.get("HAPREF_DATA") or Path.home() / ".cache" / "hapref"
    return Path(root).expanduser()


def config_key(config: dict[str, Any], version: int = FORMAT_VERSION) -> str:
    """A short hash of a JSON-able generation config plus the data-format version (the cache key)."""
    payload = json.dumps({"config": config, "format_version": version}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace`` (never half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` to a same-named file in a temporary sibling folder, then ``os.replace`` (atomic on POSIX).

    The same name matters: torch names the records inside its zip archive after the file, so the bytes of the
    result depend only on ``obj`` and the final name.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    tmp = tmp_dir / path.name
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        tmp_dir.rmdir()
    return path
