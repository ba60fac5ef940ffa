"""The strong views' mix of temporal transforms is a profile setting (issue 51 item 4).

``HAPVRProfile.temporal_p`` reaches :func:`hapref.data.augment.temporal_indices`, is part of the view pool's
cache key, and travels to the spawned encoding workers with the profile.
"""

from __future__ import annotations

import pytest
import torch

from hapref.data.augment import TEMPORAL_EDITS, TEMPORAL_P, ClipAugmenter, check_temporal_p, temporal_indices
from hapref.train import hapvr
from hapref.train.hapvr import PROFILES, HAPVRProfile, build, prepare_data

REVERSE_ONLY = tuple(float(name == "reverse") for name in TEMPORAL_EDITS)


def test_default_mix_is_s2vs() -> None:
    assert dict(zip(TEMPORAL_EDITS, TEMPORAL_P)) == {"shuffle_dropout": 0.5, "fast_forward": 0.1,
                                                     "slow_motion": 0.1, "reverse": 0.1, "pause": 0.1,
                                                     "none": 0.1}
    assert PROFILES["reshoot"].temporal_p == TEMPORAL_P


def test_a_one_edit_mix_draws_only_that_edit() -> None:
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        index, code = temporal_indices(12, 12, True, g, temporal_p=REVERSE_ONLY)
        assert index.tolist() == list(range(11, -1, -1)) and not code.any()
    keep = tuple(float(name == "none") for name in TEMPORAL_EDITS)
    for _ in range(20):
        index, _ = temporal_indices(12, 12, True, g, temporal_p=keep)
        assert index.tolist() == list(range(12))


def test_the_default_mix_draws_whatever_the_default_dtype() -> None:
    """As with the float32 module constant it replaces, the transform drawn does not depend on the caller's
    precision (shuffle=False: the other draws of these transforms are integers)."""
    previous = torch.get_default_dtype()
    draws = {}
    try:
        for dtype in (torch.float32, torch.float64):
            torch.set_default_dtype(dtype)
            draws[dtype] = [temporal_indices(16, 8, True, torch.Generator().manual_seed(s),
                                             shuffle=False)[0].tolist() for s in range(40)]
    finally:
        torch.set_default_dtype(previous)
    assert draws[torch.float32] == draws[torch.float64]


@pytest.mark.parametrize("bad", [(1.0, 0.0), (-1.0, 1, 1, 1, 1, 1), (0,) * 6, (float("nan"),) * 6, "abc", 3])
def test_bad_mixes_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="temporal_p"):
        check_temporal_p(bad)
    with pytest.raises(ValueError, match="temporal_p"):
        ClipAugmenter("strong", temporal_p=bad)
    with pytest.raises(ValueError, match="temporal_p"):
        HAPVRProfile(**{**PROFILES["smoke"].__dict__, "temporal_p": bad})


def test_the_mix_is_set_through_the_configuration_and_gets_its_own_pool(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HAPREF_DATA", str(tmp_path))
    monkeypatch.setenv("HAPREF_DATA_WORKERS", "2")     # the pool is encoded in spawned worker processes
    task, _ = build("smoke", "quadlinear_ap", seed=0, progress=False, overrides={"temporal_p": "0,0,0,1,0,0"})
    assert task.profile.temporal_p == REVERSE_ONLY
    assert task.run_settings()["profile"]["temporal_p"] == REVERSE_ONLY
    default = prepare_data("smoke")
    files = sorted(p.name for p in (tmp_path / "hapvr").glob("features-*.pt"))
    assert len(files) == 2 and files[0] != files[1], files          # a new cache key, a new pool file
    assert not torch.equal(task.data.teacher, default.teacher)      # and other views in it
    # the workers drew with the configured mix: batch 0 of the pool equals the same batch drawn here with it
    state = hapvr._encoder_state(task.profile)
    _, teacher, labels = hapvr._view_batch(state, 0)
    assert torch.equal(teacher, task.data.teacher[0]) and torch.equal(labels, task.data.labels[0])
    _, teacher_default, _ = hapvr._view_batch(hapvr._encoder_state(PROFILES["smoke"]), 0)
    assert torch.equal(teacher_default, default.teacher[0]) and not torch.equal(teacher_default, teacher)
