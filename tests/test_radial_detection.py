"""Radial detection plumbing: cut kinds, per-kind recall and AUC, the histogram detector, the step functions."""

from __future__ import annotations

import itertools

import pytest
import torch
from sklearn.metrics import roc_auc_score

from hapref.data.highlights import make_highlight_video
from hapref.detection import (critical_clip_results, critical_scores, cut_auc_by_kind, cut_recall_by_kind,
                              embedding_cut_detectors, frame_cut_scores, histogram_cut_scores,
                              histogram_detector, match_cuts, matched_cuts, train_window_embedding,
                              window_embeddings, window_features)


@pytest.fixture(scope="module")
def video():
    return make_highlight_video(num_clips=8, clip_frames=(12, 14), critical_frames=4, size=24, seed=5)


def test_scenes_and_cut_kinds_follow_the_generator(video) -> None:
    assert len(video.scenes) == len(video.clips)
    kinds = video.cut_kinds
    assert len(kinds) == len(video.cuts) and set(kinds) <= {"same photo", "other photo"}
    for (a, b), kind in zip(itertools.pairwise(video.scenes), kinds):
        assert (kind == "same photo") == (a == b)
    # same-photo cuts really film the same photo: their histogram change is far below other-photo cuts'
    h = histogram_cut_scores(video.frames)
    same = [h[c - 1] for c, k in zip(video.cuts, kinds) if k == "same photo"]
    other = [h[c - 1] for c, k in zip(video.cuts, kinds) if k == "other photo"]
    assert same and other and max(same) < min(other)
    # the scenes field is additive: the frames are those of the generator as before (a fixed seed's checksum)
    again = make_highlight_video(num_clips=8, clip_frames=(12, 14), critical_frames=4, size=24, seed=5)
    assert torch.equal(again.frames, video.frames) and again.scenes == video.scenes


def _brute_force_matches(predicted, truth, tolerance):
    """Literal transcription: walk the predictions in order, each takes its nearest free true cut."""
    free, found = list(truth), set()
    for p in sorted(predicted):
        near = sorted((abs(t - p), t) for t in free if abs(t - p) <= tolerance)
        if near:
            free.remove(near[0][1])
            found.add(near[0][1])
    return [t in found for t in truth]


def test_matched_cuts_agrees_with_match_cuts_and_a_transcription() -> None:
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        truth = sorted(set(torch.randint(0, 60, (6,), generator=g).tolist()))
        predicted = torch.randint(0, 60, (int(torch.randint(0, 8, (), generator=g)),), generator=g).tolist()
        found = matched_cuts(predicted, truth)
        assert found == _brute_force_matches(predicted, truth, 2)
        assert match_cuts(predicted, truth)["recall"] == pytest.approx(sum(found) / len(truth))


def test_recall_by_kind_counts_each_kind(video) -> None:
    kinds = video.cut_kinds
    same = [c for c, k in zip(video.cuts, kinds) if k == "same photo"]
    other = [c for c, k in zip(video.cuts, kinds) if k == "other photo"]
    assert cut_recall_by_kind(other, video) == {"other photo": 1.0, "same photo": 0.0}
    assert cut_recall_by_kind([c + 1 for c in same], video)["same photo"] == 1.0   # within the tolerance
    assert cut_recall_by_kind(same[:1], video)["same photo"] == pytest.approx(1 / len(same))


def test_cut_auc_by_kind_matches_scikit_learn(video) -> None:
    scores = frame_cut_scores(histogram_cut_scores(video.frames))
    window = 3
    auc = cut_auc_by_kind(scores, video, window)
    t = len(scores)
    far = [f for f in range(window, t - window) if all(abs(f - c) >= window for c in video.cuts)]
    for kind in ("other photo", "same photo"):
        pos = [c for c, k in zip(video.cuts, video.cut_kinds) if k == kind]
        labels = [1] * len(pos) + [0] * len(far)
        assert auc[kind] == pytest.approx(roc_auc_score(labels, scores[pos + far].numpy()))
    with pytest.raises(ValueError, match="scores must be"):
        cut_auc_by_kind(scores[1:], video, window)


def test_histogram_detector_tunes_on_train_only(video) -> None:
    other = make_highlight_video(num_clips=8, clip_frames=(12, 14), critical_frames=4, size=24, seed=6)
    tau, cuts = histogram_detector(other, video)
    h = histogram_cut_scores(video.frames)
    assert cuts == [k + 1 for k in range(len(h)) if h[k] > tau]
    tau_again, _ = histogram_detector(other, other)
    assert tau == tau_again                                  # the test video never moves the threshold


def test_detection_steps_end_to_end(video) -> None:
    feats = torch.randn(video.frames.shape[0], 6, generator=torch.Generator().manual_seed(0))
    model = train_window_embedding(video, feats, None, seed=0, window=4, steps=3, fc_dim=8, hidden_dim=4)
    emb = window_embeddings(model, feats, 4)
    direct = model.embed_features(window_features(feats, 4), torch.full((emb.shape[0],), 4))
    assert torch.allclose(emb, direct)
    cuts = embedding_cut_detectors(emb, emb, video, video, 4)
    assert set(cuts) == {"scan", "contrast"}
    result = critical_clip_results(emb, emb, video, video, 4, video.cuts, video.cuts)
    assert all(0.0 <= v <= 1.0 for v in result.values())
    # on the true clips with the video's own threshold, "true clips" and "oracle" are the same choice
    assert result["critical_true_clips"] == result["critical_oracle"]
    s = critical_scores(emb, video.clips, 4)
    labels = torch.tensor(video.critical)
    assert result["auc_true_clips"] == pytest.approx(roc_auc_score(labels.numpy(), s.numpy()))
