"""``python -m hapref.train``: bad run arguments are refused up front, each naming the argument."""

from __future__ import annotations

import pytest

from hapref.train.__main__ import main


def _error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_out_must_be_a_run_folder(tmp_path, capsys) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    assert "is an existing file" in _error(capsys, ["hapvr", "--out", str(a_file)])
    other = tmp_path / "photos"
    other.mkdir()
    (other / "a.jpg").write_bytes(b"")
    assert "not a hapref run folder" in _error(capsys, ["hapvr", "--out", str(other)])


def test_device_vcdb_and_settings_are_named(tmp_path, capsys) -> None:
    assert "--device must be cpu, cuda or cuda:N" in _error(capsys, ["hapvr", "--device", "bogus"])
    assert "--vcdb supervises TCA" in _error(capsys, ["tca", "--vcdb", str(tmp_path / "vcdb.pickle")])
    err = _error(capsys, ["hapvr", "--set", "frames=1"])
    assert "frames must be >= 4" in err
