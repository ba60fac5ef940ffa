"""Atomic writes: no partial file survives a failure."""

import pytest
import torch

from hapref import files


def test_atomic_writes_leave_no_partial_file(monkeypatch, tmp_path):
    target = tmp_path / "sub" / "file.bin"
    files.atomic_write_bytes(target, b"abc")
    assert target.read_bytes() == b"abc"

    def broken_save(obj, f):
        open(f, "wb").write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        files.atomic_torch_save({"x": 1}, tmp_path / "sub" / "model.pt")
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["file.bin"]
