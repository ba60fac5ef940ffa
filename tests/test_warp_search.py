"""Alignment with a direction/speed search (hapref.similarity.alignment.warp_search) and the temporal-edit
evaluation splits (hapref.data.temporal_edits): edited copies are found, against brute force on the features."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hapref.data import TEMPORAL_EDIT_SPLITS, edit_indices, temporal_edit_split
from hapref.similarity import (ALIGNMENTS, WARPS, chamfer_similarity, frame_to_frame, hough_voting, pad_videos,
                               temporal_network, warp_search, warp_target)

PARAMS = {"temporal_network": {"top_k": 3, "window": 1, "threshold": 0.0},
          "hough": {"top_k": 3, "bin_width": 1, "threshold": 0.0},
          "dtw": {}, "band": {"width": 0}, "dp": {"gap": 0.2, "bias": 0.0}}


def _video(frames: int, seed: int) -> torch.Tensor:
    """Unit frame descriptors ``[frames, 16]`` that drift slowly, as a shot's frames do."""
    g = torch.Generator().manual_seed(seed)
    steps = torch.randn(frames, 16, generator=g, dtype=torch.float64)
    steps[1:] *= 0.3
    return F.normalize(steps.cumsum(dim=0), dim=-1)


def _warped_features(target: torch.Tensor, direction: int, speed: float) -> torch.Tensor:
    """The warp applied to the target's frames themselves (the brute force: no index arithmetic shared)."""
    frames = target if direction == 1 else target.flip(0)
    if speed == 2.0:
        return frames.repeat_interleave(2, dim=0)
    if speed == 0.5:
        return frames[::2]
    return frames


@pytest.mark.parametrize("edit, warp", [("reversed", (-1, 1.0)), ("2x", (1, 2.0)), ("0.5x", (1, 0.5))])
@pytest.mark.parametrize("method", ["temporal_network", "hough"])
def test_an_edited_copy_is_found_by_the_search(edit: str, warp: tuple, method: str) -> None:
    query = _video(12, 0)
    copy = query[edit_indices(12, edit)]
    s = query @ copy.T
    plain = ALIGNMENTS[method](s, **PARAMS[method])
    score, k = warp_search(s, method=method, return_warp=True, **PARAMS[method])
    assert WARPS[int(k)] == warp
    assert float(score) > float(plain) + 0.2
    unedited = ALIGNMENTS[method](query @ query.T, **PARAMS[method])
    if edit != "2x":            # reversed and 0.5x copies are undone exactly (2x dropped every other frame)
        assert float(score) == pytest.approx(float(unedited), abs=1e-12)
    # an unrelated video is not lifted to a copy's score by the search
    other = _video(12, 1)
    assert float(warp_search(query @ other.T, method=method, **PARAMS[method])) < 0.5 * float(score)


@pytest.mark.parametrize("method", ["temporal_network", "hough", "dtw", "band", "dp"])
def test_search_equals_brute_force_over_warped_features(method: str) -> None:
    """Padded batch of pairs: warp_search == max over warps of the method on features warped by hand."""
    queries = [_video(n, 10 + n) for n in (9, 6)]
    targets = [_video(n, 20 + n) for n in (7, 10, 5)]
    targets[1][:6] = queries[1].flip(0)                 # one reversed partial copy
    q, qv = pad_videos(queries)
    t, tv = pad_videos(targets)
    s = torch.einsum("qid,tjd->qtij", q, t)
    got, index = warp_search(s, qv[:, None, :], tv[None, :, :], method=method, return_warp=True,
                             **PARAMS[method])
    for a, qa in enumerate(queries):
        for b, tb in enumerate(targets):
            brute = [float(ALIGNMENTS[method](qa @ _warped_features(tb, d, v).T, **PARAMS[method]))
                     for d, v in WARPS]
            assert float(got[a, b]) == pytest.approx(max(brute), abs=1e-12)
            assert int(index[a, b]) == brute.index(max(brute))


def test_identity_warp_is_the_method() -> None:
    s = torch.rand(3, 4, 8, 6, dtype=torch.float64)
    tv = torch.arange(6)[None, None, :] < torch.tensor([[6, 4, 1, 3]])[..., None]
    only = warp_search(s, None, tv, method="hough", warps=((1, 1.0),), **PARAMS["hough"])
    assert torch.equal(only, hough_voting(s, None, tv, **PARAMS["hough"]))
    assert torch.equal(warp_target(s, tv)[0], s.masked_fill(~tv[..., None, :], 0.0))


def test_search_accepts_a_function_and_normalize() -> None:
    s = torch.eye(5, dtype=torch.float64).flip(-1) + 0.01
    a = warp_search(s, method=temporal_network, top_k=1, window=1, normalize="zscore")
    b = warp_search(s, method="temporal_network", top_k=1, window=1, normalize="zscore")
    assert torch.equal(a, b)


@pytest.mark.parametrize("call, error, match", [
    (lambda: warp_target(torch.zeros(3, 3), direction=0), ValueError, "direction"),
    (lambda: warp_target(torch.zeros(3, 3), speed=0.0), ValueError, "speed"),
    (lambda: warp_target(torch.zeros(3, 3), speed="2"), TypeError, "speed"),
    (lambda: warp_target(torch.zeros(3), speed=2.0), ValueError, "sims"),
    (lambda: warp_target(torch.zeros(3, 3), torch.tensor([True, False, True])), ValueError, "target_valid"),
    (lambda: warp_search(torch.zeros(3, 3), method="chamfer"), ValueError, "method"),
    (lambda: warp_search(torch.zeros(3, 3), warps=()), ValueError, "warps"),
])
def test_warp_bad_input(call, error, match: str) -> None:
    with pytest.raises(error, match=match):
        call()


# -------------------------------------------------------------------------------------------- edit splits
def test_edit_indices_cover_the_splits() -> None:
    g = torch.Generator().manual_seed(0)
    assert TEMPORAL_EDIT_SPLITS == ("none", "reversed", "2x", "0.5x", "pause", "local_shuffle")
    assert edit_indices(6, "none").tolist() == list(range(6))
    pause = edit_indices(12, "pause", g).tolist()
    assert len(pause) == 15 and sorted(set(pause)) == list(range(12))
    held = [i for i in set(pause) if pause.count(i) > 1]
    assert len(held) == 1 and pause.count(held[0]) == 4
    shuffled = edit_indices(10, "local_shuffle", g)
    for start in range(0, 10, 4):
        assert sorted(shuffled[start:start + 4].tolist()) == list(range(start, min(start + 4, 10)))


def test_edit_split_edits_only_the_marked_videos() -> None:
    videos = [_video(n, n) for n in (8, 5, 7)]
    db, valid = pad_videos(videos)
    for edit in TEMPORAL_EDIT_SPLITS:
        out, out_valid = temporal_edit_split(db, valid, edit, torch.tensor([True, False, True]), seed=3)
        assert torch.equal(out[1, :5], videos[1]) and int(out_valid[1].sum()) == 5
        n = int(out_valid[0].sum())
        assert (out[0, n:] == 0).all() and out_valid[0, :n].all()
        expected = videos[2][edit_indices(7, edit, torch.Generator().manual_seed(0))] if edit in (
            "none", "reversed", "2x", "0.5x") else None
        if expected is not None:
            assert torch.equal(out[2, :len(expected)], expected)
    again = temporal_edit_split(db, valid, "local_shuffle", torch.tensor([True, True, True]), seed=3)
    assert torch.equal(again[0], temporal_edit_split(db, valid, "local_shuffle", torch.ones(3, dtype=torch.bool),
                                                     seed=3)[0])


def test_a_reversed_split_is_undone_by_the_search() -> None:
    """End to end on descriptors: on the reversed split the search scores each copy as the plain method scores
    it on the unedited split, and Chamfer (order-blind) does not move at all."""
    queries = [_video(10, s) for s in range(3)]
    db, valid = pad_videos(queries + [_video(9, 7)])
    q, qv = pad_videos(queries)
    edited = torch.tensor([True, True, True, False])
    rev, rev_valid = temporal_edit_split(db, valid, "reversed", edited)
    f2f = frame_to_frame(q[:, :, None], db[:, :, None], x_valid=qv, y_valid=valid)   # one region per frame
    f2f_rev = frame_to_frame(q[:, :, None], rev[:, :, None], x_valid=qv, y_valid=rev_valid)
    plain = temporal_network(f2f, qv[:, None], valid[None], **PARAMS["temporal_network"])
    searched = warp_search(f2f_rev, qv[:, None], rev_valid[None], **PARAMS["temporal_network"])
    assert torch.allclose(searched.diagonal(), plain.diagonal(), atol=1e-12)
    assert torch.allclose(chamfer_similarity(f2f_rev.masked_fill(~rev_valid[None, :, None, :], -2.0)).diagonal(),
                          chamfer_similarity(f2f.masked_fill(~valid[None, :, None, :], -2.0)).diagonal())


@pytest.mark.parametrize("call, match", [
    (lambda: edit_indices(5, "mirror"), "edit must be one of"),
    (lambda: edit_indices(0, "none"), "length"),
    (lambda: temporal_edit_split(torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool), "2x",
                                 torch.ones(3, dtype=torch.bool)), "edited"),
    (lambda: temporal_edit_split(torch.zeros(2, 3, 4), torch.tensor([[True, False, True]] * 2), "2x",
                                 torch.ones(2, dtype=torch.bool)), "prefix"),
    (lambda: temporal_edit_split(torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool), "slow",
                                 torch.ones(2, dtype=torch.bool)), "edit must be one of"),
])
def test_edit_split_bad_input(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
