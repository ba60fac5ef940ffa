"""Atomic file writes: a reader or a crash never sees half a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace`` (never half a file).

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     atomic_write_bytes(Path(d) / "x.bin", b"abc").read_bytes()
        b'abc'
    """
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

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     torch.load(atomic_torch_save({"w": torch.ones(2)}, Path(d) / "ckpt.pt"), weights_only=True)
        {'w': tensor([1., 1.])}
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
