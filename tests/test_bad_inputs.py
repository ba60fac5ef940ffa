"""Issue 25 item 3: every unclear or silent bad input becomes a clear error naming the argument."""

from __future__ import annotations

import pytest
import torch

from hapref.losses import (HardestTripletLoss, MemoryBankCircle, MemoryBankInfoNCE, QuadLinearAP,
                           frame_level_ap_loss)
from hapref.models.autossvh import GradeNet
from hapref.similarity import (VideoSimilarityNetwork, frame_to_frame, mean_pooled_similarity, pair_valid,
                               pairwise_cosine, reduce_topk_chamfer, topk_chamfer, video_similarity_matrix)

VIDEOS = torch.nn.functional.normalize(torch.randn(3, 5, 4, 8, generator=torch.Generator().manual_seed(0)), dim=-1)


def test_pairwise_cosine_of_one_vector_names_the_form():
    with pytest.raises(ValueError, match=r"x must be a set of row vectors \[\.\.\., N, D\].*x\[None\]"):
        pairwise_cosine(torch.randn(8))
    with pytest.raises(ValueError, match="y must be a set of row vectors"):
        pairwise_cosine(torch.randn(2, 8), torch.randn(8))


@pytest.mark.parametrize("k", [3.0, 2, -0.1])
def test_rates_outside_zero_one_are_named(k):
    with pytest.raises(ValueError, match=r"k must be a rate in \[0, 1\]"):
        reduce_topk_chamfer(torch.randn(3, 4), k)
    with pytest.raises(ValueError, match=r"spatial_k must be a rate in \[0, 1\]"):
        frame_to_frame(VIDEOS, VIDEOS, k)
    with pytest.raises(ValueError, match=r"k must be a rate in \[0, 1\]"):
        video_similarity_matrix(VIDEOS, VIDEOS, measure="topk_chamfer", k=k)


def test_rate_of_the_wrong_type():
    with pytest.raises(TypeError, match=r"k must be a rate in \[0, 1\]"):
        reduce_topk_chamfer(torch.randn(3, 4), "0.1")


def test_valid_flags_of_the_wrong_shape_are_named():
    with pytest.raises(ValueError, match=r"x_valid .*must be bool flags .* of shape \[3, 5\], got shape \[3, 4\]"):
        frame_to_frame(VIDEOS, VIDEOS, x_valid=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"y_valid .*must be bool flags .* of shape \[5\]"):
        frame_to_frame(VIDEOS, VIDEOS[0], y_valid=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"query_valid .*must be bool flags .* of shape \[3, 5\], got shape \[2, 5\]"):
        video_similarity_matrix(VIDEOS, VIDEOS, query_valid=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"database_valid .*must be bool flags"):
        video_similarity_matrix(VIDEOS, VIDEOS, database_valid=torch.ones(3, 6, dtype=torch.bool))
    net = VideoSimilarityNetwork()
    with pytest.raises(ValueError, match=r"valid must be bool flags .* of shape \[3, 5\], got shape \[3, 4\]"):
        net(VIDEOS, torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"query_valid .*must be bool flags"):
        net.score(VIDEOS, VIDEOS, query_valid=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"x_valid .*must be bool flags"):
        net.frame_similarity(VIDEOS, VIDEOS, torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"valid must be bool flags .* broadcastable to \[3, 3, 5, 5\]"):
        net.video_similarity(torch.rand(3, 3, 5, 5), torch.ones(3, 3, 5, 4, dtype=torch.bool))


def test_fractional_valid_flags_are_refused_not_read_as_true():
    half = torch.full((3, 5), 0.5)
    with pytest.raises(ValueError, match=r"valid must be bool flags .* or hold only 0/1, got torch.float32 values such as 0.5"):
        VideoSimilarityNetwork()(VIDEOS, half)
    with pytest.raises(ValueError, match="x_valid .*must be bool flags"):
        frame_to_frame(VIDEOS, VIDEOS, x_valid=half)
    with pytest.raises(ValueError, match="valid must be bool flags"):
        topk_chamfer(torch.rand(3, 4), 0.0, valid=torch.full((3, 4), 0.5))
    with pytest.raises(ValueError, match="query_valid .*must be bool flags"):
        pair_valid(torch.tensor([0.5, 1.0]), None)
    with pytest.raises(ValueError, match="x_valid .*must be bool flags"):
        mean_pooled_similarity(torch.randn(2, 5, 8), torch.randn(2, 5, 8), x_valid=torch.full((2, 5), 0.5))
    # 0/1 numbers still work and give the bool result
    ones = torch.ones(3, 5)
    torch.testing.assert_close(frame_to_frame(VIDEOS, VIDEOS, x_valid=ones),
                               frame_to_frame(VIDEOS, VIDEOS, x_valid=ones.bool()))


def test_score_with_the_wrong_descriptor_size_reaches_its_check():
    net = VideoSimilarityNetwork(dims=8, attention=True)
    with pytest.raises(ValueError, match="queries and database must share D, got 8 and 6"):
        net.score(VIDEOS, torch.randn(3, 5, 4, 6))
    with pytest.raises(ValueError, match=r"features must have the descriptor size D = 8 of the region attention"):
        net.score(torch.randn(3, 5, 4, 6), torch.randn(3, 5, 4, 6))
    with pytest.raises(ValueError, match=r"features must have the descriptor size D = 8"):
        net(torch.randn(3, 5, 4, 6))


def test_empty_batches_and_videos_without_frames():
    net = VideoSimilarityNetwork()
    no_frames = torch.randn(3, 0, 4, 8)
    with pytest.raises(ValueError, match=r"features must hold at least one video \[N >= 1"):
        net(torch.randn(0, 5, 4, 8))
    with pytest.raises(ValueError, match=r"features must hold at least one frame, region and feature"):
        net(no_frames)
    with pytest.raises(ValueError, match=r"queries must hold at least one frame"):
        net.score(no_frames, VIDEOS)
    with pytest.raises(ValueError, match=r"queries must hold at least one frame"):
        video_similarity_matrix(no_frames, VIDEOS)
    with pytest.raises(ValueError, match=r"x must hold at least one frame"):
        frame_to_frame(no_frames, VIDEOS)
    with pytest.raises(ValueError, match=r"x must hold at least one frame"):
        frame_to_frame(torch.randn(0, 8), VIDEOS)
    # documented: an empty batch of queries gives an empty score matrix
    assert video_similarity_matrix(VIDEOS[:0], VIDEOS).shape == (0, 3)
    assert net.score(VIDEOS[:0], VIDEOS).shape == (0, 3)


def test_gradenet_on_the_wrong_size():
    with pytest.raises(ValueError, match=r"tokens must be \[B, T, dim=8\] embedded frame tokens, got shape \(2, 5, 6\)"):
        GradeNet(8)(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match="tokens must have 3 dimension"):
        GradeNet(8)(torch.randn(5, 8))


def test_garbage_index_and_feature_files_name_the_path(tmp_path):
    pytest.importorskip("faiss")
    from hapref.search.index import HammingIndex, VectorIndex
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"garbage" * 10)
    with pytest.raises(ValueError, match=f"path {garbage} is not a binary FAISS index written by HammingIndex.save"):
        HammingIndex.load(garbage)
    with pytest.raises(ValueError, match=f"path {garbage} is not a FAISS index written by VectorIndex.save"):
        VectorIndex.load(garbage)


def test_non_hdf5_features_name_the_path(tmp_path):
    pytest.importorskip("h5py")
    from hapref.data.loaders import HDF5Features
    garbage = tmp_path / "features.hdf5"
    garbage.write_text("not hdf5")
    with pytest.raises(ValueError, match=f"path {garbage} is not an HDF5 file"):
        HDF5Features(garbage)


def test_an_empty_svd_file_is_refused(tmp_path):
    from hapref.data.loaders import load_svd
    path = tmp_path / "test_groundtruth"
    path.write_text("\n")
    with pytest.raises(ValueError, match="holds no 'query.mp4 candidate.mp4 0|1' line"):
        load_svd(path)


def test_overlapping_pseudo_labels_are_refused():
    sims = torch.rand(1, 1, 3, 3)
    positive = torch.eye(3, dtype=torch.bool)[None, None]
    with pytest.raises(ValueError, match=r"positive and negative must be disjoint .* 3 pair\(s\) flagged both"):
        frame_level_ap_loss(sims, positive, positive.clone(), torch.ones(1, 1, dtype=torch.bool), QuadLinearAP())


def test_frame_level_loss_refuses_inf_and_returns_float32_zero_for_half():
    sims = torch.rand(1, 1, 3, 3)
    sims[0, 0, 0, 0] = float("inf")
    no_pair = torch.zeros(1, 1, dtype=torch.bool)
    labels = torch.zeros(1, 1, 3, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="frame_similarity must be finite"):
        frame_level_ap_loss(sims, labels, labels, no_pair, QuadLinearAP())
    out = frame_level_ap_loss(torch.full((1, 1, 3, 3), 6e4).half(), labels, labels, no_pair, QuadLinearAP())
    assert out.dtype == torch.float32 and out.item() == 0.0


MEMORY_BANK = [MemoryBankInfoNCE, MemoryBankCircle, HardestTripletLoss]


@pytest.mark.parametrize("make", MEMORY_BANK)
def test_memory_bank_losses_retire_mask_and_take_ignore(make):
    sims = torch.tensor([[0.8, 0.75, 0.1], [0.9, -0.2, 0.3]])
    valid = torch.tensor([[False, True], [True, True]])
    with pytest.raises(TypeError, match=rf"{make.__name__}.forward\(\) takes no keyword 'mask': it is now 'ignore'"):
        make()(sims, mask=valid)
    torch.testing.assert_close(make()(sims, ignore=~valid), make()(sims, valid))
    with pytest.raises(ValueError, match="not both"):
        make()(sims, valid, ignore=~valid)
    with pytest.raises(ValueError, match=r"ignore must be a bool tensor of shape \[2, 2\]"):
        make()(sims, ignore=torch.ones(2, 3, dtype=torch.bool))


def test_hardest_triplet_promotes_half_precision_and_its_empty_path_is_zero():
    sims = torch.full((4, 1), 6e4).half()  # no negative column: the empty path, whose half sum overflows
    out = HardestTripletLoss()(sims)
    assert out.dtype == torch.float32 and out.item() == 0.0
    assert HardestTripletLoss()(torch.tensor([[0.8, 0.75]]).half()).dtype == torch.float32


def test_mask_on_the_metric_functions_names_ignore() -> None:
    from hapref.metrics import map_and_micro_ap, map_at_n_tie_aware

    scores, relevance = torch.rand(2, 3), torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(TypeError, match="takes no keyword 'mask': it is now 'ignore'"):
        map_and_micro_ap(scores, relevance, mask=None)
    with pytest.raises(TypeError, match="takes no keyword 'mask': it is now 'ignore'"):
        map_at_n_tie_aware(scores, relevance, 2, mask=None)


def test_evaluate_refuses_string_and_boolean_scores_and_doubled_targets(tmp_path) -> None:
    from hapref.evaluation import evaluate
    from hapref.evaluation.fixtures import write_fixtures
    from hapref.evaluation.protocols import dataset_ids

    root = write_fixtures(tmp_path)
    queries, database = dataset_ids("evve", root)
    for value, name in (("0.5", "str"), (True, "bool")):
        sims = {q: {d: value for d in database[:5]} for q in queries}
        with pytest.raises(TypeError, match=f"real-number scores, got {name} values"):
            evaluate("evve", sims, root)
    svd_queries, svd_database = dataset_ids("svd", root)
    doubled = {q: {svd_database[0]: 0.5, f"{svd_database[0]}.mp4": 0.4} for q in svd_queries}
    with pytest.raises(ValueError, match="twice"):
        evaluate("svd", doubled, root)
