"""Radial pipeline: train the quadlet CNN+LSTM on the fine-grained video set with one of six losses.

``python -m hapref.train radial --loss radial --profile quick``. By default the frame CNN is frozen (a
deviation from the paper, for the CPU budget): its per-frame features are computed once per profile and
cached, and only the FC + LSTM head trains. ``--set finetune_backbone=true`` trains the CNN with the head
as the paper does (Radial Fig. 1(i), "end-to-end"): raw frames go through the backbone in train mode at every
step, and the new layers get the paper's learning-rate multiplier 10 over the pretrained convolutions
(:meth:`hapref.models.radial.QuadletVideoNet.param_groups`). Evaluation follows the paper's protocol (Radial
"Experimental settings"): QP and TP on fixed quadlets from the test split (each quadlet gives the
triplets (q,p,n) and (q,i,n)), NDCG with gains 2 / 1 / 0 and class-level MAP for test queries
against the train split.

``--set head=...`` chooses what trains on the frozen frame features (:data:`HEADS`): the paper's FC + LSTM
(``lstm``, the default), or one of the book's departures of :mod:`hapref.models.radial`: a linear layer on the
tuned motion descriptor (``linear``), the same descriptor re-weighted per dimension from the identity
(``weighting``), or the learned pooling ``normalize(A·mean + B·diff)`` (``meandiff``). The evaluation adds
``train_fine_MAP``: fine MAP of the training clips against each other, each query left out of its own ranking
(what the head has memorised, beside the test ``fine_MAP``).
"""

from __future__ import annotations

import dataclasses
import json

import torch
from torch import Tensor, nn

from hapref.data.finegrained import make_finegrained_videos, relevance_gains, sample_quadlets, sample_quadruplets, sample_triplets
from hapref.features.backbones import load_backbone
from hapref.features.frames import FeatureSplit, extract_finegrained_features
from hapref.losses.radial import (EuclideanTripletLoss, QuadletLoss, Quadruplet1Loss, Quadruplet2Loss, RadialLoss,
                                  squared_distance)
from hapref.metrics import mean_average_precision, ndcg, quadlet_precision, triplet_precision
from hapref.models.radial import DescriptorHead, MeanDiffPooling, QuadletVideoNet, frame_features, pad_features
from hapref.distributed import get_world_size, rank_rows
from hapref.train.loop import TrainConfig
from hapref.train.settings import override_all
from hapref.utils import at_least_float32, cache_per_dtype

__all__ = ["DEFAULT_LOSS", "HEADS", "LOSSES", "PROFILES", "FeatureSplit", "RadialTask", "build", "end_to_end_network",
           "extract_finegrained_features", "finegrained_features", "make_loss", "order_dependence", "order_metrics",
           "summary_line", "train_fine_map"]

LOSSES = ("triplet", "quadruplet1", "quadruplet2a", "quadruplet2b", "quadlet", "radial")
#: The paper's method (radial term + triplet term, Radial Eq. 8 + Eq. 12); the others are its baselines.
DEFAULT_LOSS = "radial"

#: What trains on the frozen frame features (``--set head=...``): the paper's FC + LSTM, and the book's departures
#: (:mod:`hapref.models.radial`): a linear layer on the tuned descriptor, its per-dimension weighting from the
#: identity, and the learned mean + difference pooling. The embedding size is the profile's ``hidden_dim``.
HEADS = ("lstm", "linear", "weighting", "meandiff")

#: Run sizes: data set, frame CNN, optimisation. "quick" is the book's CPU setting.
PROFILES: dict[str, dict] = {
    "smoke": dict(data=dict(num_classes=2, subclasses_per_class=2, train_per_subclass=3, test_per_subclass=2,
                            frames=(4, 6), size=48),
                  backbone=dict(name="small-cnn", image_size=48), steps=10, batch=8, eval_quadlets=200, lr=1e-3,
                  fc_dim=64, hidden_dim=32),
    "quick": dict(data=dict(num_classes=4, subclasses_per_class=3, train_per_subclass=5, test_per_subclass=3,
                            frames=(6, 10), size=64),
                  backbone=dict(name="efficientnet-lite0", image_size=64), steps=40, batch=16,
                  eval_quadlets=3000, lr=3e-3, fc_dim=128, hidden_dim=64),
    "full": dict(data=dict(num_classes=6, subclasses_per_class=4, train_per_subclass=10, test_per_subclass=5,
                           frames=(20, 40), size=160),
                 backbone=dict(name="efficientnet-lite0", image_size=224), steps=2000, batch=64,
                 eval_quadlets=15000, lr=1e-3, fc_dim=512, hidden_dim=128),
    # sub-classes of a class differ only in the camera move's direction over one region (zoom in / zoom out):
    # order-free summaries of the frames cannot tell siblings apart (hapref.data.finegrained, design="motion")
    "motion": dict(data=dict(num_classes=4, subclasses_per_class=2, train_per_subclass=8, test_per_subclass=4,
                             frames=(6, 10), size=64, design="motion"),
                   backbone=dict(name="efficientnet-lite0", image_size=64), steps=400, batch=16,
                   eval_quadlets=3000, lr=3e-3, fc_dim=128, hidden_dim=64),
}


@cache_per_dtype(maxsize=4)
def finegrained_features(profile: str, data_seed: int = 0) -> tuple[FeatureSplit, FeatureSplit]:
    """Frame features of the (train, test) fine-grained videos of ``profile``, computed once and cached.

    Examples:
        >>> train, test = finegrained_features("smoke")
        >>> train.features.shape, test.features.shape
        (torch.Size([12, 6, 128]), torch.Size([8, 6, 128]))
    """
    settings = _profile(profile)   # one cache with the settings dicts of build(..., overrides) (same data, CNN)
    return _features(json.dumps({k: settings[k] for k in ("data", "backbone")}, sort_keys=True), data_seed)


def _profile(profile: str | dict) -> dict:
    if isinstance(profile, dict):
        return profile
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {tuple(PROFILES)} or a settings dict, got {profile!r}")
    return PROFILES[profile]


@cache_per_dtype(maxsize=4)
def _features(data_and_backbone: str, data_seed: int = 0) -> tuple[FeatureSplit, FeatureSplit]:
    settings = json.loads(data_and_backbone)
    settings["data"]["frames"] = tuple(settings["data"]["frames"])
    return extract_finegrained_features(settings["data"], settings["backbone"], data_seed)


@cache_per_dtype(maxsize=2)
def _videos(data: str, data_seed: int = 0) -> tuple[list[Tensor], list[Tensor]]:
    settings = json.loads(data)
    settings["frames"] = tuple(settings["frames"])
    train, test = make_finegrained_videos(seed=data_seed, **settings)
    return train.videos, test.videos


def end_to_end_network(feature_dim: int, fc_dim: int, hidden_dim: int, backbone: dict) -> QuadletVideoNet:
    """The quadlet network with a *trainable* pretrained frame CNN (``load_backbone(**backbone, frozen=False)``).

    The model of ``--set finetune_backbone=true`` (Radial Fig. 1(i) trained end to end); its
    :meth:`~hapref.models.radial.QuadletVideoNet.param_groups` carry the fc learning-rate multiplier.

    Examples:
        >>> net = end_to_end_network(128, 8, 4, dict(name="small-cnn", image_size=32))
        >>> net.finetunes_backbone, net.backbone.training
        (True, True)
    """
    return QuadletVideoNet(feature_dim, fc_dim, hidden_dim, backbone=load_backbone(**backbone, frozen=False))


def make_loss(loss: str) -> nn.Module:
    """The loss module for a name of :data:`LOSSES`, with the paper's margins (Radial "Experimental settings").

    Examples:
        >>> type(make_loss("radial")).__name__, type(make_loss("triplet")).__name__
        ('RadialLoss', 'EuclideanTripletLoss')
        >>> make_loss("arcface")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: loss must be one of ('triplet', ..., 'radial'), got 'arcface'
    """
    modules = {"triplet": lambda: EuclideanTripletLoss(margin=0.7),
               "quadruplet1": lambda: Quadruplet1Loss(margin=0.5),
               "quadruplet2a": lambda: Quadruplet2Loss(1.0, 0.5), "quadruplet2b": lambda: Quadruplet2Loss(1.0, 0.5),
               "quadlet": lambda: QuadletLoss(0.7, 0.3, 0.5), "radial": lambda: RadialLoss(c=3.0, margin=0.3)}
    if loss not in modules:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    return modules[loss]()


def _sample(loss: str, split: FeatureSplit, count: int, generator: torch.Generator) -> Tensor:
    if loss == "triplet":
        return sample_triplets(split.classes, split.subclasses, count, generator)
    if loss.startswith("quadruplet2"):
        return sample_quadruplets(split.classes, split.subclasses, count, generator, negatives=loss[-1])
    return sample_quadlets(split.classes, split.subclasses, count, generator)


def order_metrics(train_emb: Tensor, test_emb: Tensor, train: FeatureSplit, test: FeatureSplit,
                  quadlets: Tensor) -> dict[str, float]:
    """QP, TP (on test ``quadlets`` [Q, 4]), NDCG, MAP and fine MAP (test queries vs the train split) of embeddings.

    Radial Table 2 metrics (MAP: same class relevant), plus ``fine_MAP``: MAP with only the query's own
    sub-class relevant (intermediates count as irrelevant). Embeddings are unit-norm float ``[N_train, E]`` and
    ``[N_test, E]``.

    Examples:
        >>> task = RadialTask("smoke", "radial")
        >>> train_emb = torch.nn.functional.normalize(torch.randn(len(task.train_split.classes), 8), dim=1)
        >>> test_emb = torch.nn.functional.normalize(torch.randn(len(task.test_split.classes), 8), dim=1)
        >>> metrics = order_metrics(train_emb, test_emb, task.train_split, task.test_split, task.eval_quadlets)
        >>> sorted(metrics), all(0.0 <= v <= 1.0 for v in metrics.values())
        (['MAP', 'NDCG', 'QP', 'TP', 'fine_MAP'], True)
    """
    q, p, i, n = (test_emb[quadlets[:, k]] for k in range(4))
    s_qp, s_qi, s_qn = -squared_distance(q, p), -squared_distance(q, i), -squared_distance(q, n)
    scores = test_emb @ train_emb.T  # unit vectors: ranking by cosine = ranking by distance
    gains = relevance_gains(test.classes, test.subclasses, train.classes, train.subclasses).to(scores.device)
    return {"QP": float(quadlet_precision(s_qp, s_qi, s_qn)),
            "TP": float(triplet_precision(torch.cat([s_qp, s_qi]), torch.cat([s_qn, s_qn]))),
            "NDCG": float(ndcg(scores, gains)),
            "MAP": float(mean_average_precision(scores, gains > 0)),
            "fine_MAP": float(mean_average_precision(scores, gains == 2))}


def train_fine_map(train_emb: Tensor, train: FeatureSplit) -> float:
    """Leave-one-out fine MAP on the training clips: each training clip queries the others (itself left out),
    only its own sub-class relevant. Embeddings unit-norm float ``[N_train, E]``; near 1 when the head has
    memorised its training set, whatever it does on test clips.

    Examples:
        >>> split = FeatureSplit(torch.zeros(4, 1, 1), torch.ones(4, dtype=torch.long),
        ...                      torch.tensor([0, 0, 0, 0]), torch.tensor([0, 0, 1, 1]))
        >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
        >>> train_fine_map(emb, split)             # each clip's sibling comes first
        1.0
        >>> round(train_fine_map(emb[[0, 2, 1, 3]], split), 4)  # its sibling comes last of the three
        0.3333
    """
    scores = train_emb @ train_emb.T
    gains = relevance_gains(train.classes, train.subclasses, train.classes, train.subclasses).to(scores.device)
    itself = torch.eye(len(scores), dtype=torch.bool, device=scores.device)
    return float(mean_average_precision(scores, gains == 2, ignore=itself))


def order_dependence(model: nn.Module, split: FeatureSplit, last: int = 3) -> dict[str, float]:
    """How much a head's embedding depends on the frame order and on the last frames of a clip.

    ``reversal_cos``: the mean cosine between each clip's embedding and that of the same frames reversed (1 for an
    order-free embedding); ``last_cos``: the mean cosine between a clip and its last ``last`` frames alone (near 1
    for an embedding that is a snapshot of the end of the clip). ``model`` has ``embed_features`` (any head of
    :data:`HEADS` on frozen features); every clip of ``split`` needs at least ``last`` frames.

    Examples:
        >>> from hapref.models.radial import MeanDiffPooling
        >>> split = FeatureSplit(torch.randn(3, 6, 5), torch.tensor([6, 5, 4]), torch.zeros(3), torch.zeros(3))
        >>> _ = torch.manual_seed(0)
        >>> probe = order_dependence(MeanDiffPooling(5, 4), split)
        >>> sorted(probe), all(-1 <= v <= 1 for v in probe.values())
        (['last_cos', 'reversal_cos'], True)
    """
    if isinstance(last, bool) or not isinstance(last, int) or not 1 <= last <= int(split.lengths.min()):
        raise ValueError(f"last must be an int in [1, shortest clip = {int(split.lengths.min())}], got {last!r}")
    device = next(model.parameters()).device
    clips = [f[:int(n)] for f, n in zip(split.features, split.lengths)]
    embed = lambda seqs: model.embed_features(*(t.to(device) for t in pad_features(seqs)))
    with torch.no_grad():
        whole, reversed_, end = embed(clips), embed([c.flip(0) for c in clips]), embed([c[-last:] for c in clips])
    return {"reversal_cos": float((whole * reversed_).sum(-1).mean()),
            "last_cos": float((whole * end).sum(-1).mean())}


class RadialTask:
    """The :class:`hapref.train.loop.Task` of the Radial pipeline (one loss, one seed).

    Examples:
        >>> task = RadialTask("smoke", "radial")
        >>> model = task.build_model()
        >>> features, lengths, arity = task.batch(0, torch.device("cpu"))
        >>> features.shape, arity, sorted(task.loss(model, (features, lengths, arity)))
        (torch.Size([32, 6, 128]), 4, ['loss'])
        >>> sorted(task.evaluate(model))
        ['MAP', 'NDCG', 'QP', 'TP', 'fine_MAP', 'train_fine_MAP']

        Another head on the same features (``--set head=linear``):

        >>> task = RadialTask({**PROFILES["smoke"], "head": "linear"}, "radial")
        >>> type(task.build_model()).__name__, task.model_spec()["kwargs"]
        ('DescriptorHead', {'feature_dim': 128, 'embed_dim': 32})
    """

    def __init__(self, profile: str | dict, loss: str, seed: int = 0, data_seed: int = 0) -> None:
        self.settings = _profile(profile)
        self.loss_name, self.seed, self.data_seed = loss, seed, data_seed
        self.criterion = make_loss(loss)
        if isinstance(profile, str):
            self.train_split, self.test_split = finegrained_features(profile, data_seed)
        else:
            key = {k: self.settings[k] for k in ("data", "backbone")}
            self.train_split, self.test_split = _features(json.dumps(key, sort_keys=True), data_seed)
        self.eval_quadlets = sample_quadlets(self.test_split.classes, self.test_split.subclasses,
                                             self.settings["eval_quadlets"], torch.Generator().manual_seed(12345))
        #: end to end (``finetune_backbone``): the raw frames of each split, fed through the trainable CNN
        self.finetune = bool(self.settings.get("finetune_backbone", False))
        self.head = self.settings.get("head", "lstm")
        if self.head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {self.head!r}")
        if self.finetune and self.head != "lstm":
            raise ValueError(f"finetune_backbone=true trains the CNN under the FC + LSTM head only, "
                             f"got head={self.head!r}")
        if self.finetune:
            self.train_videos, self.test_videos = _videos(json.dumps(self.settings["data"], sort_keys=True),
                                                          data_seed)

    def build_model(self) -> nn.Module:
        spec = self.model_spec()
        factory = {"hapref.train.radial:end_to_end_network": end_to_end_network,
                   "hapref.models.radial:QuadletVideoNet": QuadletVideoNet,
                   "hapref.models.radial:DescriptorHead": DescriptorHead,
                   "hapref.models.radial:MeanDiffPooling": MeanDiffPooling}[spec["factory"]]
        return factory(**spec["kwargs"])

    def param_groups(self, model: nn.Module, lr: float) -> list[dict]:
        """The optimiser's groups (:meth:`hapref.models.radial.QuadletVideoNet.param_groups`): the head at ``lr``,
        a trainable CNN at ``lr / 10`` (Radial's fc learning-rate multiplier).

        Examples:
            >>> task = RadialTask("smoke", "radial")
            >>> [g["lr"] for g in task.param_groups(task.build_model(), 1e-3)]
            [0.001]
        """
        return model.param_groups(lr)

    def run_settings(self) -> dict:
        """Every resolved setting of the run (recorded in ``config.json``): the profile dict and the loss name.

        Examples:
            >>> settings = RadialTask("smoke", "triplet").run_settings()
            >>> settings["loss"], settings["profile"]["batch"], settings["profile"]["backbone"]["name"]
            ('triplet', 8, 'small-cnn')
        """
        return {"profile": self.settings, "loss": self.loss_name, "data_seed": self.data_seed}

    def model_spec(self) -> dict:
        """The model's constructor and arguments (:func:`hapref.train.load_run`); inputs are frame features of the
        profile's ``backbone``.

        Examples:
            Rebuild the FC + LSTM head from the spec alone, as :func:`hapref.train.load_run` does:

            >>> import importlib
            >>> task = RadialTask("smoke", "radial")
            >>> spec = task.model_spec()
            >>> spec["kwargs"]
            {'feature_dim': 128, 'fc_dim': 64, 'hidden_dim': 32}
            >>> module, name = spec["factory"].split(":")
            >>> net = getattr(importlib.import_module(module), name)(**spec["kwargs"])
            >>> net.embed_features(task.test_split.features, task.test_split.lengths).shape
            torch.Size([8, 32])
        """
        feature_dim = int(self.train_split.features.shape[-1])
        if self.head == "meandiff":
            return {"factory": "hapref.models.radial:MeanDiffPooling",
                    "kwargs": {"feature_dim": feature_dim, "embed_dim": self.settings["hidden_dim"]}}
        if self.head in ("linear", "weighting"):
            extra = {"diagonal": True} if self.head == "weighting" else {"embed_dim": self.settings["hidden_dim"]}
            return {"factory": "hapref.models.radial:DescriptorHead", "kwargs": {"feature_dim": feature_dim, **extra}}
        kwargs = {"feature_dim": feature_dim, "fc_dim": self.settings["fc_dim"],
                  "hidden_dim": self.settings["hidden_dim"]}
        if self.finetune:
            return {"factory": "hapref.train.radial:end_to_end_network",
                    "kwargs": {**kwargs, "backbone": dict(self.settings["backbone"])}}
        return {"factory": "hapref.models.radial:QuadletVideoNet", "kwargs": kwargs}

    def batch(self, step: int, device: torch.device) -> tuple[Tensor, Tensor, int]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        batch = self.settings["batch"]         # torchrun: this rank's rows of the global batch of W·batch tuples
        index = _sample(self.loss_name, self.train_split, batch * get_world_size(), generator)[rank_rows(batch)]
        rows = index.T.reshape(-1)  # all q's, then all p's, ...
        if self.finetune:           # raw clips: the CNN runs inside the step (end to end)
            return ([self.train_videos[r] for r in rows.tolist()], None, index.shape[1])
        return (self.train_split.features[rows].to(device), self.train_split.lengths[rows], index.shape[1])

    def loss(self, model: nn.Module, batch: tuple) -> dict[str, Tensor]:
        inputs, lengths, arity = batch
        embedded = model(inputs) if lengths is None else model.embed_features(inputs, lengths)
        members = embedded.view(arity, -1, embedded.shape[-1]).unbind(0)
        return {"loss": self.criterion(*members)}

    def embed(self, model: nn.Module, split: FeatureSplit) -> Tensor:
        """Unit-norm float embeddings ``[N, hidden_dim]`` of every video of ``split`` (the LSTM state after each
        video's own last frame), the inputs of :func:`order_metrics`.

        Examples:
            >>> task = RadialTask("smoke", "radial")
            >>> _ = torch.manual_seed(0)
            >>> model = task.build_model().eval()
            >>> emb = task.embed(model, task.test_split)
            >>> emb.shape, torch.allclose(emb.norm(dim=1), torch.ones(8))
            (torch.Size([8, 32]), True)
            >>> split, i = task.test_split, 0          # padding frames do not change a video's embedding
            >>> alone = model.embed_features(split.features[i:i + 1, :int(split.lengths[i])], split.lengths[i:i + 1])
            >>> torch.allclose(alone[0], emb[i], atol=1e-6)
            True
        """
        device = next(model.parameters()).device
        features, lengths = split.features, split.lengths
        if getattr(model, "finetunes_backbone", False):   # end to end: the frames through the trained CNN
            videos = self.train_videos if split is self.train_split else self.test_videos
            features, lengths = pad_features([frame_features(model.backbone, v) for v in videos])
        return at_least_float32(model.embed_features(features.to(device), lengths))

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        train_emb = self.embed(model, self.train_split)
        metrics = order_metrics(train_emb, self.embed(model, self.test_split), self.train_split, self.test_split,
                                self.eval_quadlets)
        return {**metrics, "train_fine_MAP": train_fine_map(train_emb, self.train_split)}


def build(profile: str, loss: str, seed: int, progress: bool = True,
          overrides: dict[str, str] | None = None, data_seed: int = 0) -> tuple[RadialTask, TrainConfig]:
    """The task and optimisation settings of one run (registry contract of :mod:`hapref.train`).

    ``overrides`` (``--set``) change profile keys (``data.size`` for nested ones) or :class:`TrainConfig` fields;
    ``finetune_backbone=true`` trains the CNN with the head (end to end; default false, the frozen CNN);
    ``head=`` one of :data:`HEADS` chooses what trains on the frozen features (default ``lstm``).
    ``progress`` is part of that contract; the few seconds of feature extraction here show no bar.
    ``data_seed`` draws another instance of the profile's data set (same design and sizes, other clips).

    Examples:
        >>> task, config = build("smoke", "radial", seed=0, progress=False)
        >>> type(task).__name__, task.loss_name, config.steps
        ('RadialTask', 'radial', 10)
        >>> task, _ = build("smoke", "radial", seed=0, progress=False, overrides={"finetune_backbone": "true"})
        >>> task.finetune, task.build_model().finetunes_backbone
        (True, True)
        >>> task, _ = build("smoke", "triplet", seed=0, progress=False, overrides={"head": "meandiff"})
        >>> type(task.build_model()).__name__
        'MeanDiffPooling'
    """
    settings = _profile(profile)
    config = TrainConfig(steps=settings["steps"], lr=settings["lr"], weight_decay=1e-4,
                         warmup_steps=settings["steps"] // 10, seed=seed)
    if overrides:
        settings = {**settings, "finetune_backbone": bool(settings.get("finetune_backbone", False)),
                    "head": settings.get("head", "lstm")}
        if "steps" in overrides:            # the warm-up stays a tenth of the run unless it is set too
            config = dataclasses.replace(config, steps=int(overrides["steps"]),
                                         warmup_steps=int(overrides["steps"]) // 10)
        config, settings = override_all([config, settings], overrides)
        return RadialTask(settings, loss, seed, data_seed), config
    return RadialTask(profile, loss, seed, data_seed), config


def summary_line(metrics: dict[str, float]) -> str:
    """``eval: QP=.. TP=.. NDCG=.. MAP=..`` (QP and TP in %, as the paper prints them).

    Examples:
        >>> summary_line({"QP": 0.5, "TP": 0.75, "NDCG": 0.9, "MAP": 0.8})
        'eval: QP=50.00 TP=75.00 NDCG=0.9000 MAP=0.8000'
    """
    return (f"eval: QP={100 * metrics['QP']:.2f} TP={100 * metrics['TP']:.2f} "
            f"NDCG={metrics['NDCG']:.4f} MAP={metrics['MAP']:.4f}")
