"""Data preparation over worker processes: the same cache bytes for any number of workers, and two processes
preparing the same data at once leave one cache file (neither fails)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hapref.data.cache import data_workers, file_lock, parallel_map

ROOT = Path(__file__).resolve().parents[1]


CODE = "from hapref.train.hapvr import prepare_data; prepare_data('smoke')"


def _env(root: Path, workers: int) -> dict[str, str]:
    return {**os.environ, "HAPREF_DATA": str(root), "HAPREF_DATA_WORKERS": str(workers)}


def _features(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / "hapvr").glob("features-*.pt")}


def _clear(root: Path) -> None:
    for path in (root / "hapvr").glob("features-*.pt"):
        path.unlink()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A data folder whose smoke benchmark exists (generated once; each test prepares the features anew)."""
    root = tmp_path_factory.mktemp("workers")
    subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, env=_env(root, 1), check=True, timeout=600)
    return root


def test_cache_bytes_do_not_depend_on_the_number_of_workers(root):
    one = _features(root)
    _clear(root)
    subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, env=_env(root, 3), check=True, timeout=600)
    assert len(one) == 1 and one == _features(root)


def test_two_processes_preparing_the_same_data_leave_one_file(root):
    _clear(root)
    procs = [subprocess.Popen([sys.executable, "-c", CODE], cwd=ROOT, env=_env(root, 1), stderr=subprocess.PIPE)
             for _ in range(2)]
    errors = [p.communicate(timeout=600)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert len(_features(root)) == 1
    assert not list((root / "hapvr").glob(".*.tmp"))          # no temporary folder left behind


def _square(state, x):
    return state * x * x


def _offset():
    return 2


def test_parallel_map_keeps_order_and_matches_one_process():
    items = list(range(9))
    assert parallel_map(_square, items, _offset, workers=2) == parallel_map(_square, items, _offset, workers=1) == \
        [2 * x * x for x in items]


def _fail(state, x):
    if x == 3:
        raise ValueError("item 3 is bad")
    return x


def test_a_worker_error_reaches_the_caller():
    with pytest.raises(ValueError, match="item 3 is bad"):
        parallel_map(_fail, range(6), _offset, workers=2)


def test_workers_are_validated(monkeypatch):
    monkeypatch.setenv("HAPREF_DATA_WORKERS", "0")
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        data_workers()
    monkeypatch.setenv("HAPREF_DATA_WORKERS", "5")
    assert data_workers() == 5


def test_file_lock_excludes_a_second_holder(tmp_path):
    import fcntl

    with file_lock(tmp_path / "x.pt"):
        with open(tmp_path / "x.pt.lock", "a") as other:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_rendering_workers_feed_an_encoder_in_this_process(monkeypatch, tmp_path):
    """The GPU path (clips rendered by workers, encoded here) gives the bytes of the CPU path (both in workers):
    forced here by reporting a non-CPU device while the encoder still runs on the CPU."""
    import torch

    from hapref.train import hapvr

    monkeypatch.setenv("HAPREF_DATA", str(tmp_path))
    monkeypatch.setenv("HAPREF_DATA_WORKERS", "1")
    cpu = hapvr.prepare_data.__wrapped__("smoke") if hasattr(hapvr.prepare_data, "__wrapped__") else None
    assert cpu is not None
    for path in (tmp_path / "hapvr").glob("features-*.pt"):
        path.unlink()
    monkeypatch.setattr(hapvr, "get_device", lambda: torch.device("meta"))
    monkeypatch.setattr(hapvr.FrameEncoder, "__init__", _cpu_encoder(hapvr.FrameEncoder.__init__))
    gpu = hapvr.prepare_data.__wrapped__("smoke")
    for name in ("train", "teacher", "labels", "queries", "database"):
        assert torch.equal(getattr(cpu, name), getattr(gpu, name)), name


def _cpu_encoder(init):
    def wrapped(self, profile, image_size):
        import torch

        from hapref.train import hapvr

        saved = hapvr.get_device
        hapvr.get_device = lambda: torch.device("cpu")
        try:
            init(self, profile, image_size)
        finally:
            hapvr.get_device = saved
    return wrapped
