"""The API as a new user meets it: embeddings + labels, NumPy inputs, single videos, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hapref.losses import (MAE, MSE, BlackBoxAP, Circle, Contrastive, FastAP, HAPVRObjective, InfoNCE, ListwiseAP,
                           QuadLinearAP, SmoothAP, SSHN, Triplet, embedding_batch, p2set_loss)
from hapref.metrics import (average_precision, mean_average_precision, micro_average_precision, ndcg,
                            precision_recall_curve, quadlet_precision, triplet_precision)
from hapref.similarity import chamfer_similarity, pairwise_cosine, topk_chamfer

RANKING_LOSSES = {"QuadLinearAP": QuadLinearAP, "SmoothAP": SmoothAP, "FastAP": FastAP, "BlackBoxAP": BlackBoxAP,
                  "ListwiseAP": ListwiseAP, "Contrastive": Contrastive, "Triplet": Triplet, "Circle": Circle,
                  "MAE": MAE, "MSE": MSE, "InfoNCE": InfoNCE}


def balanced_batch(classes: int, per_class: int, dim: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(classes * per_class, dim, dtype=torch.float64, generator=g)
    labels = torch.arange(classes).repeat_interleave(per_class)
    perm = torch.randperm(len(labels), generator=g)
    return emb[perm], labels[perm]


# ---------------------------------------------------------------- embeddings + labels

@pytest.mark.parametrize("name", sorted(RANKING_LOSSES))
def test_on_embeddings_is_the_loss_of_the_cosine_matrix_without_self_pairs(name):
    emb, labels = balanced_batch(3, 4)
    emb.requires_grad_(True)
    loss = RANKING_LOSSES[name]()
    out = loss.on_embeddings(emb, labels)
    cos = torch.nn.functional.normalize(emb, dim=1) @ torch.nn.functional.normalize(emb, dim=1).T
    expected = loss(cos, labels[:, None] == labels[None, :], torch.eye(12, dtype=torch.bool))
    assert out.item() == pytest.approx(expected.item(), abs=1e-12)
    out.backward()
    assert torch.isfinite(emb.grad).all() and emb.grad.abs().sum() > 0


def test_on_embeddings_takes_numpy_labels_a_reference_set_and_keep_self():
    emb, labels = balanced_batch(3, 3)
    a = QuadLinearAP().on_embeddings(emb, labels.numpy())
    b = QuadLinearAP().on_embeddings(emb, labels)
    assert a.item() == b.item()
    ref = QuadLinearAP().on_embeddings(emb[:4], labels[:4], ref_embeddings=emb, ref_labels=labels)
    assert ref.item() == pytest.approx(QuadLinearAP()(pairwise_cosine(emb[:4], emb),
                                                      labels[:4, None] == labels[None]).item(), abs=1e-12)
    kept = QuadLinearAP().on_embeddings(emb, labels, keep_self=True)
    assert kept.item() == pytest.approx(QuadLinearAP()(pairwise_cosine(emb), labels[:, None] == labels).item())


def test_embedding_batch_computes_half_precision_cosines_in_float32():
    emb = torch.tensor([[1e-4, 0.0], [0.0, 3e-4], [0.0, 0.0]], dtype=torch.float16)
    scores, relevance, ignore = embedding_batch(emb, torch.tensor([0, 1, 1]))
    assert scores.dtype == torch.float32 and torch.isfinite(scores).all()
    assert scores[0, 0].item() == pytest.approx(1.0, abs=1e-3) and scores[2, 2].item() == 0


@pytest.mark.parametrize("classes,per_class", [(3, 4), (4, 4), (5, 2)])
def test_on_embeddings_equals_pytorch_metric_learning_on_class_balanced_batches(classes, per_class):
    pml = pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.losses import CircleLoss, ContrastiveLoss, FastAPLoss, TripletMarginLoss
    from pytorch_metric_learning.reducers import MeanReducer
    del pml
    emb, labels = balanced_batch(classes, per_class)
    pairs = [
        (FastAP(num_bins=10), FastAPLoss(num_bins=10)),
        (Contrastive(1.0, 0.0), ContrastiveLoss(pos_margin=1.0, neg_margin=0.0, distance=CosineSimilarity(),
                                                reducer=MeanReducer())),
        (Triplet(margin=0.2), TripletMarginLoss(margin=0.2, distance=CosineSimilarity(), reducer=MeanReducer())),
        (Circle(margin=0.4, scale=80), CircleLoss(m=0.4, gamma=80)),
    ]
    for ours, theirs in pairs:
        expected = theirs(emb, labels).item()
        got = ours.on_embeddings(emb, labels).item()
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-9), type(ours).__name__


def test_documented_difference_from_pytorch_metric_learning_smooth_ap():
    """PML's SmoothAPLoss ranks each query among its own positives; ``keep_self=True`` does the same."""
    pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning.losses import SmoothAPLoss
    emb = torch.randn(16, 8, dtype=torch.float64)
    labels = torch.arange(4).repeat_interleave(4)  # PML needs contiguous, equal class blocks (classes == per class)
    theirs = SmoothAPLoss(temperature=0.01)(emb, labels).item()
    assert SmoothAP(0.01).on_embeddings(emb, labels, keep_self=True).item() == pytest.approx(theirs, abs=1e-6)
    assert SmoothAP(0.01).on_embeddings(emb, labels).item() != pytest.approx(theirs, abs=1e-6)


@pytest.mark.parametrize("call, name", [
    (lambda: SmoothAP().on_embeddings(torch.rand(4, 3), torch.tensor([0, 1, 0])), "labels"),
    (lambda: SmoothAP().on_embeddings(torch.rand(4, 3), torch.rand(4)), "labels"),
    (lambda: SmoothAP().on_embeddings(torch.rand(4), torch.tensor([0, 1, 0, 1])), "embeddings"),
    (lambda: SmoothAP().on_embeddings([[1.0]], [0]), "embeddings"),
    (lambda: SmoothAP().on_embeddings(torch.rand(0, 3), torch.zeros(0, dtype=torch.long)), "embeddings"),
    (lambda: SmoothAP().on_embeddings(torch.rand(2, 3), torch.tensor([0, 1]), ref_embeddings=torch.rand(2, 3)),
     "ref_labels"),
    (lambda: SmoothAP().on_embeddings(torch.rand(2, 3), torch.tensor([0, 1]), torch.rand(2, 4), torch.tensor([0, 1])),
     "ref_embeddings"),
])
def test_on_embeddings_misuse_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


# ---------------------------------------------------------------- NumPy inputs

def test_metrics_accept_numpy_arrays():
    rng = np.random.default_rng(0)
    scores, relevance = rng.random((3, 6)), rng.random((3, 6)) > 0.5
    relevance[:, 0] = True
    t_scores, t_rel = torch.from_numpy(scores), torch.from_numpy(relevance)
    assert mean_average_precision(scores, relevance).item() == mean_average_precision(t_scores, t_rel).item()
    micro = micro_average_precision(t_scores, t_rel).item()
    assert micro_average_precision(scores, relevance.astype(int)).item() == micro
    assert average_precision(scores[0], relevance[0]).item() == average_precision(t_scores[0], t_rel[0]).item()
    assert ndcg(scores, relevance.astype(float)).item() == ndcg(t_scores, t_rel.double()).item()
    for a, b in zip(precision_recall_curve(scores, relevance), precision_recall_curve(t_scores, t_rel)):
        assert torch.equal(a, b)
    assert quadlet_precision(*scores) == quadlet_precision(*t_scores)
    assert triplet_precision(scores[0], scores[1]) == triplet_precision(t_scores[0], t_scores[1])
    assert mean_average_precision(scores.astype(np.float32), relevance).dtype == torch.float32
    from hapref.metrics import gmap, map_at_n
    assert map_at_n(scores, relevance, 3).item() == map_at_n(t_scores, t_rel, 3).item()
    assert gmap(scores, relevance).item() == gmap(t_scores, t_rel).item()


def test_metrics_name_the_argument_for_lists_and_other_non_arrays():
    with pytest.raises(TypeError, match="scores must be a torch.Tensor or a NumPy array, got list"):
        mean_average_precision([[0.3, 0.2]], torch.ones(1, 2))
    with pytest.raises(TypeError, match="relevance must be a torch.Tensor or a NumPy array, got list"):
        mean_average_precision(torch.rand(1, 2), [[1, 0]])
    with pytest.raises(TypeError, match="gains must be"):
        ndcg(torch.rand(1, 2), [[1, 0]])


# ---------------------------------------------------------------- bad inputs: clear errors

@pytest.mark.parametrize("name", sorted(RANKING_LOSSES))
@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_infinite_scores_are_refused_instead_of_giving_nan(name, value):
    scores = torch.rand(4, 4)
    scores[1, 2] = value
    with pytest.raises(ValueError, match="scores must be finite"):
        RANKING_LOSSES[name]()(scores, torch.eye(4, dtype=torch.bool) | (torch.rand(4, 4) > 0.5))


@pytest.mark.parametrize("make, name", [
    (lambda: Triplet(margin=-0.1), "margin"), (lambda: Circle(margin=-0.1), "margin must"),
    (lambda: Circle(scale=-1), "scale"),
    (lambda: Circle(scale=0), "scale"), (lambda: Contrastive(pos_margin=0.0, neg_margin=0.5), "pos_margin"),
])
def test_negative_margins_and_scales_are_refused(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_sshn_on_an_empty_batch_gives_zeros_on_the_graph():
    scores = torch.zeros(0, 0, requires_grad=True)
    hard_negative, self_sim = SSHN()(scores, torch.zeros(0, 0, dtype=torch.bool))
    assert hard_negative.item() == 0 and self_sim.item() == 0
    (hard_negative + self_sim).backward()
    assert scores.grad.shape == (0, 0)


def test_unknown_objective_preset_is_a_value_error_listing_the_presets():
    with pytest.raises(ValueError, match="weights must be one of .*paper.*released"):
        HAPVRObjective(QuadLinearAP(), None, weights="papers")


def test_p2set_refuses_cluster_ids_out_of_range():
    codes = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])
    with pytest.raises(ValueError, match=r"assigned must hold cluster ids in \[0, C=2\)"):
        p2set_loss(codes, torch.tensor([0, 2]), codes)
    with pytest.raises(ValueError, match="assigned"):
        p2set_loss(codes, torch.tensor([0, -1]), codes)


def test_topk_chamfer_given_two_videos_says_what_it_takes():
    a, b = torch.rand(5, 3, 4), torch.rand(6, 3, 4)
    with pytest.raises(TypeError, match="k must be a float rate in \\[0, 1\\].*frame_to_frame"):
        topk_chamfer(a, b)


def test_chamfer_on_empty_input_is_a_value_error():
    for sim in (torch.rand(0, 4), torch.rand(4, 0), torch.rand(2, 0, 3)):
        with pytest.raises(ValueError, match="sim must have at least one query and one target item"):
            chamfer_similarity(sim)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pairwise_cosine_of_half_precision_zero_and_tiny_rows_is_finite(dtype):
    x = torch.tensor([[0.0, 0.0], [1e-4, 0.0], [3.0, 4.0]], dtype=dtype)
    sim = pairwise_cosine(x)
    assert sim.dtype == dtype and torch.isfinite(sim).all()
    assert sim[0].abs().max().item() == 0 and sim[1, 1].item() == pytest.approx(1.0, abs=1e-2)


@pytest.mark.parametrize("call, name", [
    (lambda: __import__("hapref.similarity", fromlist=["x"]).mean_pooled_similarity(
        torch.rand(3, 4), torch.rand(3, 4), x_valid=torch.ones(7, dtype=torch.bool)), "x_valid"),
    (lambda: __import__("hapref.similarity", fromlist=["x"]).pair_valid(torch.ones(3, dtype=torch.bool), [1, 0]),
     "target_valid"),
    (lambda: __import__("hapref.losses.radial", fromlist=["x"]).squared_distance(torch.rand(3, 2), torch.rand(3, 3)),
     "a and b"),
])
def test_similarity_helpers_name_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


@pytest.mark.parametrize("make, name", [
    (lambda: __import__("hapref.losses", fromlist=["x"]).EuclideanTripletLoss(margin=-0.1), "margin"),
    (lambda: __import__("hapref.losses", fromlist=["x"]).QuadletLoss(margin1=0.7, margin2=-0.3, margin3=0.5),
     "margin2"),
    (lambda: __import__("hapref.losses", fromlist=["x"]).RadialLoss(margin=-1.0), "margin"),
    (lambda: __import__("hapref.losses", fromlist=["x"]).Quadruplet1Loss(margin=-0.5), "margin"),
    (lambda: __import__("hapref.losses", fromlist=["x"]).Quadruplet2Loss(1.0, -0.5), "margin2"),
])
def test_tuple_losses_refuse_negative_margins(make, name):
    with pytest.raises(ValueError, match=f"{name} must be >= 0"):
        make()


def test_tuple_losses_refuse_infinite_embeddings():
    from hapref.losses import EuclideanTripletLoss, QuadletLoss, RadialLoss
    q, p, i, n = torch.randn(4, 3, 5)
    n[1, 2] = float("inf")
    with pytest.raises(ValueError, match="n must be finite"):
        EuclideanTripletLoss()(q, p, n)
    for loss in (QuadletLoss(), RadialLoss()):
        with pytest.raises(ValueError, match="n must be finite"):
            loss(q, p, i, n)


# ---------------------------------------------------------------- single videos

def test_frame_to_frame_takes_single_videos():
    from hapref.similarity import frame_to_frame
    a = torch.nn.functional.normalize(torch.randn(40, 9, 16), dim=-1)  # one video [T, R, D]
    b = torch.nn.functional.normalize(torch.randn(20, 9, 16), dim=-1)
    single = frame_to_frame(a, b)
    assert single.shape == (40, 20)
    torch.testing.assert_close(single, frame_to_frame(a[None], b[None])[0, 0])
    assert frame_to_frame(a, b[None]).shape == (1, 40, 20) and frame_to_frame(a[None], b).shape == (1, 40, 20)
    valid = torch.arange(20) < 15
    batched = frame_to_frame(a[None], b[None], y_valid=valid[None])[0, 0]
    torch.testing.assert_close(frame_to_frame(a, b, y_valid=valid), batched)
    frames_only = frame_to_frame(a[:, 0], b[:, 0])  # [T, D]: one descriptor per frame
    torch.testing.assert_close(frames_only, a[:, 0] @ b[:, 0].T)
    with pytest.raises(ValueError, match=r"x must be one video \[T, R, D\]"):
        frame_to_frame(torch.rand(2, 3, 4, 5, 6), b)
    with pytest.raises(ValueError, match="valid flags of y"):
        frame_to_frame(a, b, y_valid=valid[None])


def test_similarity_scores_take_single_videos():
    from hapref.similarity import VideoSimilarityNetwork, video_similarity_matrix
    videos = torch.nn.functional.normalize(torch.randn(3, 8, 4, 16), dim=-1)
    net = VideoSimilarityNetwork().eval()
    batch = net.score(videos, videos)
    torch.testing.assert_close(net.score(videos[1], videos), batch[1])
    torch.testing.assert_close(net.score(videos, videos[2]), batch[:, 2])
    torch.testing.assert_close(net.score(videos[1], videos[2]), batch[1, 2])
    for measure in ("chamfer", "cosine", "topk_chamfer"):
        full = video_similarity_matrix(videos, videos, measure=measure)
        torch.testing.assert_close(video_similarity_matrix(videos[0], videos[1], measure=measure), full[0, 1])


def test_tca_model_takes_a_single_video():
    from hapref.models import TemporalContextAggregator
    model = TemporalContextAggregator(d_model=8, nhead=2, dim_feedforward=16).eval()
    videos = torch.randn(2, 5, 8)
    torch.testing.assert_close(model(videos[0]), model(videos)[0])
    torch.testing.assert_close(model.frame_embeddings(videos[1]), model.frame_embeddings(videos)[1])
    valid = torch.tensor([True, True, True, False, False])
    torch.testing.assert_close(model(videos[0], valid), model(videos[0, :3]), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"features must have shape \[N, T, 8\]"):
        model(torch.randn(5, 7))


# ---------------------------------------------------------------- bad inputs in models and loaders

def test_autossvh_net_names_a_wrong_feature_size():
    from hapref.models import AutoSSVHNet
    net = AutoSSVHNet(feature_dim=12, nbits=8, frames=6)
    with pytest.raises(ValueError, match=r"x must be \[B, T=6, D=12\] frame features, got shape \(2, 6, 10\)"):
        net.encode(torch.randn(2, 6, 10))


def test_drop_index_refuses_positions_out_of_range():
    from hapref.models.autossvh import drop_index
    x = torch.randn(2, 5, 3)
    for drop in (torch.tensor([[0, 5], [1, 2]]), torch.tensor([[-1, 2], [1, 2]])):
        with pytest.raises(ValueError, match=r"drop must hold frame positions in \[0, T=5\)"):
            drop_index(x, drop)
    with pytest.raises(ValueError, match="integer frame indices"):
        drop_index(x, torch.zeros(2, 1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gumbel_noise_and_top_k_are_finite_in_half_precision(dtype):
    from hapref.models.autossvh import gumbel_noise, gumbel_topk
    noise = gumbel_noise((20000,), generator=torch.Generator().manual_seed(0), dtype=dtype)
    assert noise.dtype == dtype and torch.isfinite(noise).all()
    assert noise.float().mean().item() == pytest.approx(0.5772, abs=0.03)  # Euler–Mascheroni
    hard, index = gumbel_topk(torch.randn(4, 10, dtype=dtype), 3, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(hard).all() and index.shape == (4, 3)


def test_memory_bank_losses_refuse_infinite_similarities():
    from hapref.losses import MemoryBankCircle, MemoryBankInfoNCE
    sims = torch.tensor([[0.5, float("inf"), 0.1]])
    for loss in (MemoryBankInfoNCE(), MemoryBankCircle()):
        with pytest.raises(ValueError, match="sims must be finite"):
            loss(sims)


def test_hdf5_features_refuse_nan_frames(tmp_path):
    h5py = pytest.importorskip("h5py")
    from hapref.data import HDF5Features
    x = np.ones((6, 4), dtype=np.float32)
    x[3, 1] = np.nan
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["good"], f["bad"] = np.ones((6, 4), dtype=np.float32), x
    data = HDF5Features(tmp_path / "f.h5", ["good", "bad"])
    assert data[0]["frames"].shape == (6, 1, 4)
    with pytest.raises(ValueError, match=r"'bad'.*NaN or inf.*frames \[3\]"):
        data[1]


@pytest.mark.parametrize("vid", ["../x", "a/b", "..", "/etc/passwd", ""])
def test_frames_directory_refuses_ids_that_leave_the_root(tmp_path, vid):
    from hapref.data import FramesDirectory
    with pytest.raises(ValueError, match="ids must be plain file names"):
        FramesDirectory(tmp_path, [vid])


# ---------------------------------------------------------------- docstrings people can use

def _public_objects(prefixes):
    import importlib
    import inspect
    import pkgutil

    import hapref
    for info in pkgutil.walk_packages(hapref.__path__, "hapref."):
        if info.name.endswith("__main__") or not info.name.startswith(prefixes):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            function = inspect.unwrap(obj) if callable(obj) and hasattr(obj, "__wrapped__") else obj  # lru_cache
            if not name.startswith("_") and getattr(obj, "__module__", None) == module.__name__ \
                    and (inspect.isfunction(function) or inspect.isclass(obj)):
                yield f"{module.__name__}.{name}", obj


def test_every_module_documents_its_own_forward():
    """``help(SomeLoss)`` shows what the call takes, never torch's generic ``Module.forward`` text."""
    generic = torch.nn.Module.forward.__doc__
    modules = [(name, obj) for name, obj in _public_objects(("hapref.",))
               if isinstance(obj, type) and issubclass(obj, torch.nn.Module)]
    missing = [name for name, obj in modules
               if obj.forward is not torch.nn.Module.forward and obj.forward.__doc__ in (None, generic)]
    assert missing == []
    without_example = [name for name, obj in modules
                       if "forward" in vars(obj) and "Examples:" not in (obj.forward.__doc__ or "")]
    assert without_example == []


def test_public_functions_and_classes_have_examples():
    """Every public class and function of every hapref module (``__main__`` modules aside) shows a runnable
    ``Examples`` section; the doctests themselves run in ``pytest --doctest-modules hapref``."""
    objects = list(_public_objects(("hapref.",)))
    assert len(objects) > 300
    missing = [name for name, obj in objects if "Examples:" not in (obj.__doc__ or "")]
    assert missing == []


def _methods_without_examples():
    """Public methods and properties defined by a public hapref class, minus overrides (their base class documents
    the call) and the four hooks of hapref.train.loop.Task on task classes (the trainer calls them; the task's own
    example shows them)."""
    import inspect

    from hapref.train.loop import Task
    hooks = {name for name in vars(Task) if not name.startswith("_")}
    missing = []
    for name, obj in _public_objects(("hapref.",)):
        if not inspect.isclass(obj) or obj is Task:
            continue
        is_task = hooks <= set(dir(obj))
        for attr, value in vars(obj).items():
            if attr.startswith("_") or (is_task and attr in hooks) or any(attr in vars(b) for b in obj.__mro__[1:]):
                continue
            if isinstance(value, property):
                function = value.fget
            elif isinstance(value, (staticmethod, classmethod)):
                function = value.__func__
            elif inspect.isfunction(value):
                function = value
            else:
                continue
            if "Examples:" not in (function.__doc__ or ""):
                missing.append(f"{name}.{attr}")
    return missing


def test_public_methods_have_examples():
    """What users call on an object (``index.search``, ``whitening.fit``, ``net.encode``...) shows a runnable example."""
    assert _methods_without_examples() == []
