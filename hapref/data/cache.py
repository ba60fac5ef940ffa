"""Where generated data lives: a data directory and config-keyed cache names (writes: :mod:`hapref.files`)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

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
