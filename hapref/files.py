"""Atomic file writes and verified reads: a reader or a crash never sees half a file, nor a corrupt one.

Every file hapref writes with ``torch.save`` is a zip archive that records a CRC-32 of each record; ``torch.load``
never checks them. :func:`load_verified` does, before unpickling (``weights_only=True``), so a flipped bit
in a cache or a checkpoint is reported with the file's path instead of being trained on.
"""

from __future__ import annotations

import datetime
import os
import tempfile
import zipfile
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


class CorruptFileError(ValueError):
    """A file hapref wrote fails its integrity check (CRC mismatch, not a torch archive, a folder, wrong type).

    A ``ValueError``, so code that catches bad input catches it too; the message names the file.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     try:
        ...         load_verified(Path(d))  # a folder where a file belongs
        ...     except CorruptFileError as err:
        ...         print(type(err).__mro__[1].__name__, str(err).endswith("is not a file"))
        ValueError True
    """


def verify_torch_file(path: str | os.PathLike) -> Path:
    """Check every record of a ``torch.save`` archive against its stored CRC-32; CorruptFileError names ``path``.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = atomic_torch_save({"w": torch.arange(100.0)}, Path(d) / "x.pt")
        ...     data = bytearray(path.read_bytes())
        ...     data[data.find(bytes(torch.arange(100.0).numpy().data)) + 9] ^= 0x40  # one flipped bit
        ...     _ = path.write_bytes(bytes(data))
        ...     verify_torch_file(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hapref.files.CorruptFileError: .../x.pt fails its integrity check: record x/data/0 does not match its CRC-32
    """
    path = Path(path)
    if not path.is_file():
        raise CorruptFileError(f"{path} is not a file")
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise CorruptFileError(f"{path} fails its integrity check: not a readable torch archive "
                               f"({type(err).__name__}: {err})") from None
    if bad is not None:
        raise CorruptFileError(f"{path} fails its integrity check: record {bad} does not match its CRC-32")
    return path


def load_verified(path: str | os.PathLike, map_location: Any = None, expect: type | None = None) -> Any:
    """``torch.load(path, weights_only=True)`` after :func:`verify_torch_file`; ``expect`` checks the top type.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     load_verified(atomic_torch_save({"w": torch.ones(2)}, Path(d) / "x.pt"), expect=dict)
        {'w': tensor([1., 1.])}
    """
    verify_torch_file(path)
    try:
        value = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 - a foreign pickle, an unsupported global, ...
        raise CorruptFileError(f"{path} is not a hapref file ({type(err).__name__})") from None
    if expect is not None and not isinstance(value, expect):
        raise CorruptFileError(f"{path} holds a {type(value).__name__}, expected a {expect.__name__}")
    return value


def set_aside(path: str | os.PathLike) -> Path:
    """Rename a corrupt file (or a folder where a file belongs) to ``<name>.corrupt-<UTC time>``; return the new path.

    Nothing is deleted: the bytes stay for inspection, and the original name is free for a regenerated file.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     old = Path(d) / "cache.pt"
        ...     _ = old.write_bytes(b"junk")
        ...     new = set_aside(old)
        ...     old.exists(), new.read_bytes(), new.name.startswith("cache.pt.corrupt-")
        (False, b'junk', True)
    """
    path = Path(path)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, target)
    return target
