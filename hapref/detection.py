"""Shot-boundary and critical-clip detection from a learned clip embedding (Radial loss paper, "Testing", Fig. 3).

A window of ``W`` consecutive frames slides over the video (stride 1) and is embedded. Inside a clip,
the distance ``||f_1 - f_n||`` from the clip's first window stays low; when the first frame of the
next clip enters window ``n`` it jumps: that is a hard cut, and the scan restarts from the first
window of the new clip. A clip whose curve rises towards its end holds a critical event (its last
windows are intermediates, farther from the query than positives). Training quadlets come from the
same structure: q, p calm windows of a critical clip, i a window over its event, n a window of the
next clip; calm clips give triplets (q, p, n).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hapref.data.highlights import HighlightVideo
from hapref.losses.radial import EuclideanTripletLoss

__all__ = [
    "window_features",
    "HighlightTask",
    "distance_scan",
    "detect_cuts",
    "contrast_cut_scores",
    "peak_frames",
    "critical_scores",
    "histogram_cut_scores",
    "match_cuts",
    "clip_critical_prf",
    "best_threshold",
    "matched_cuts",
    "cut_recall_by_kind",
    "frame_cut_scores",
    "cut_auc_by_kind",
    "histogram_detector",
    "train_window_embedding",
    "window_embeddings",
    "clips_from",
    "scan_threshold",
    "embedding_cut_detectors",
    "critical_clip_results",
    "mean_window_embeddings",
    "mean_std_table",
]


def window_features(frame_features: Tensor, window: int) -> Tensor:
    """All stride-1 windows of per-frame features ``[T, F]`` as ``[T - W + 1, W, F]`` (a view).

    Radial "Testing", Fig. 3.

    Examples:
        >>> window_features(torch.arange(5.0)[:, None], 3).squeeze(-1)
        tensor([[0., 1., 2.],
                [1., 2., 3.],
                [2., 3., 4.]])
    """
    if frame_features.ndim != 2 or frame_features.shape[0] < window or window < 1:
        raise ValueError(f"frame_features must be [T, F] with T >= window={window}, got {tuple(frame_features.shape)}")
    return frame_features.unfold(0, window, 1).transpose(1, 2)


def _windows_inside(start: int, end: int, window: int) -> Tensor:
    return torch.arange(start, end - window + 1)


class HighlightTask:
    """A :class:`hapref.train.loop.Task` that trains a window embedding on one annotated highlight video.

    ``loss`` is a quadlet loss module (e.g. :class:`~hapref.losses.radial.RadialLoss`) applied to
    quadlets from critical clips, or ``None`` for the triplet-only baseline; calm clips always add the
    triplet loss with margin 0.7 (Radial "Experimental settings").

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> from hapref.losses import RadialLoss
        >>> from hapref.models import QuadletVideoNet
        >>> video = make_highlight_video(num_clips=3, clip_frames=(20, 20), critical_frames=6, size=16)
        >>> make_model = lambda: QuadletVideoNet(6, fc_dim=8, hidden_dim=4)
        >>> task = HighlightTask(video, torch.randn(60, 6), make_model, RadialLoss(), window=4, batch=4)
        >>> model = task.build_model()
        >>> task.loss(model, task.batch(0, torch.device("cpu")))["loss"].shape
        torch.Size([])
    """

    def __init__(self, video: HighlightVideo, frame_features: Tensor, model_factory, loss: nn.Module | None,
                 window: int = 8, batch: int = 16, seed: int = 0) -> None:
        self.windows = window_features(frame_features, window)
        self.model_factory, self.quadlet_loss, self.batch_size, self.seed = model_factory, loss, batch, seed
        self.triplet_loss = EuclideanTripletLoss(margin=0.7)
        calm, event, nxt, crit = [], [], [], []
        for k, ((start, end), critical) in enumerate(zip(video.clips[:-1], video.critical[:-1])):
            calm_end = end - (video.critical_frames[start:end].sum().item())
            calm.append(_windows_inside(start, calm_end, window))
            # windows with at least half their frames in the event, never crossing the cut into the next clip
            last = end - window
            event.append(torch.arange(min(max(start, calm_end - window // 2), last), last + 1))
            nxt.append(_windows_inside(*video.clips[k + 1], window))
            crit.append(critical)
        self.calm, self.event, self.next, self.is_critical = calm, event, nxt, torch.tensor(crit)

    def build_model(self) -> nn.Module:
        return self.model_factory()

    def _pick(self, pools: list[Tensor], clips: Tensor, generator: torch.Generator) -> Tensor:
        return torch.stack([pools[c][torch.randint(len(pools[c]), (1,), generator=generator)][0] for c in clips.tolist()])

    def _pick_pair(self, pools: list[Tensor], clips: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Two different windows of each clip's pool (the same one only when the pool holds a single window)."""
        first, second = [], []
        for c in clips.tolist():
            n = len(pools[c])
            a = int(torch.randint(n, (), generator=generator))
            b = (a + 1 + int(torch.randint(max(n - 1, 1), (), generator=generator))) % n
            first.append(pools[c][a])
            second.append(pools[c][b])
        return torch.stack(first), torch.stack(second)

    def batch(self, step: int, device: torch.device) -> tuple[Tensor, Tensor]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        clips = torch.randint(len(self.calm), (self.batch_size,), generator=generator)
        q, p = self._pick_pair(self.calm, clips, generator)
        i, n = self._pick(self.event, clips, generator), self._pick(self.next, clips, generator)
        critical = self.is_critical[clips] if self.quadlet_loss is not None else torch.zeros_like(clips, dtype=torch.bool)
        rows = torch.stack([q, p, i, n])
        return self.windows[rows.reshape(-1)].to(device), critical.to(device)

    def loss(self, model: nn.Module, batch: tuple[Tensor, Tensor]) -> dict[str, Tensor]:
        windows, critical = batch
        lengths = torch.full((windows.shape[0],), windows.shape[1])
        q, p, i, n = model.embed_features(windows, lengths).view(4, -1, model.lstm.hidden_size).unbind(0)
        total = self.triplet_loss(q[~critical], p[~critical], n[~critical]) * (~critical).float().mean()
        if critical.any():
            total = total + self.quadlet_loss(q[critical], p[critical], i[critical], n[critical]) * critical.float().mean()
        return {"loss": total}

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        return {}


def distance_scan(embeddings: Tensor, window: int, cut_threshold: float) -> tuple[list[int], Tensor]:
    """Radial Fig. 3: the sequential scan of ``||f_1 - f_n||`` over window embeddings ``[N, E]``.

    Returns the detected cut frames (first frame of each new clip) and the curve ``[N]`` (distance of
    every window to the first window of the clip it was scanned in). A cut is declared at window n
    when the curve jumps by more than ``cut_threshold`` from window n-1; its frame is ``n + W - 1``.

    Examples:
        >>> emb = torch.cat([torch.zeros(6, 2), torch.ones(6, 2) * 3])  # two shots of windows
        >>> cuts, curve = distance_scan(emb, window=4, cut_threshold=1.0)
        >>> cuts, curve[:8]
        ([9], tensor([0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 4.2426, 0.0000]))
    """
    curve = torch.zeros(embeddings.shape[0], dtype=embeddings.dtype)
    cuts, anchor, n = [], 0, 1
    while n < embeddings.shape[0]:
        d = (embeddings[n] - embeddings[anchor]).norm()
        curve[n] = d
        previous = curve[n - 1] if n - 1 > anchor else torch.zeros(())
        if d - previous > cut_threshold:
            cut = n + window - 1
            cuts.append(cut)
            anchor = min(cut, embeddings.shape[0] - 1)
            n = anchor + 1
            continue
        n += 1
    return cuts, curve


def detect_cuts(embeddings: Tensor, window: int, cut_threshold: float) -> list[int]:
    """Cut frames found by :func:`distance_scan`. Radial "Testing", Fig. 3.

    Examples:
        >>> emb = torch.cat([torch.zeros(6, 2), torch.ones(6, 2) * 3])  # two shots of windows
        >>> detect_cuts(emb, window=4, cut_threshold=1.0)
        [9]
    """
    return distance_scan(embeddings, window, cut_threshold)[0]


def contrast_cut_scores(embeddings: Tensor, window: int) -> Tensor:
    """``[N + W - 1]`` score per frame t: distance between the window that ends just before t and the one
    that starts at t (0 where either is missing). A variant of the Radial Fig. 3 scan that needs no anchor.

    Examples:
        >>> emb = torch.cat([torch.zeros(4, 2), torch.ones(4, 2)])
        >>> contrast_cut_scores(emb, window=2)
        tensor([0.0000, 0.0000, 0.0000, 0.0000, 1.4142, 1.4142, 0.0000, 0.0000, 0.0000])
    """
    scores = torch.zeros(embeddings.shape[0] + window - 1, dtype=embeddings.dtype)
    before, after = embeddings[: embeddings.shape[0] - window], embeddings[window:]
    scores[window: embeddings.shape[0]] = (after - before).norm(dim=-1)
    return scores


def peak_frames(scores: Tensor, threshold: float, min_gap: int) -> list[int]:
    """Frames whose score exceeds ``threshold`` and is the maximum within ``min_gap`` frames either side.

    Examples:
        >>> peak_frames(torch.tensor([0.0, 0.9, 0.2, 0.0, 0.7, 0.8, 0.1]), threshold=0.5, min_gap=2)
        [1, 5]
    """
    padded = torch.nn.functional.pad(scores[None, None], (min_gap, min_gap), value=float("-inf"))
    local_max = torch.nn.functional.max_pool1d(padded, 2 * min_gap + 1, stride=1)[0, 0]
    return ((scores > threshold) & (scores == local_max)).nonzero().flatten().tolist()


def critical_scores(embeddings: Tensor, clips: list[tuple[int, int]], window: int) -> Tensor:
    """Per detected clip, how much ``||f_1 - f_n||`` rises at the end: mean over the last quarter of its
    windows minus the mean over the first half (Radial "Testing": an increasing trend means critical).

    Examples:
        >>> emb = torch.cat([torch.zeros(8, 2), torch.linspace(0, 2, 8)[:, None].expand(8, 2)])
        >>> critical_scores(emb, [(0, 11), (11, 22)], window=4)  # the second clip drifts away: critical
        tensor([0.0000, 1.0102])
    """
    scores = []
    for start, end in clips:
        inside = torch.arange(start, max(start + 1, end - window + 1)).clamp_max(embeddings.shape[0] - 1)
        curve = (embeddings[inside] - embeddings[inside[0]]).norm(dim=-1)
        quarter = max(1, len(curve) // 4)
        scores.append(curve[-quarter:].mean() - curve[: max(1, len(curve) // 2)].mean())
    return torch.stack(scores)


def histogram_cut_scores(frames: Tensor, bins: int = 8) -> Tensor:
    """Colour-histogram change between consecutive frames ``[T - 1]`` (L1 distance of normalised joint RGB
    histograms, the classic SBD baseline's signal); score k belongs to the cut before frame k + 1.
    The baseline in the role of Radial Table 1.

    Examples:
        >>> frames = torch.cat([torch.zeros(3, 8, 8, 3), torch.full((3, 8, 8, 3), 255)]).to(torch.uint8)
        >>> histogram_cut_scores(frames)
        tensor([0., 0., 2., 0., 0.])
    """
    quantised = (frames.long() * bins // 256)  # [T, H, W, 3]
    codes = (quantised[..., 0] * bins + quantised[..., 1]) * bins + quantised[..., 2]
    hist = torch.zeros(frames.shape[0], bins ** 3).scatter_add_(
        1, codes.flatten(1), torch.ones(codes.flatten(1).shape))
    hist = hist / hist.sum(1, keepdim=True)
    return (hist[1:] - hist[:-1]).abs().sum(1)


def match_cuts(predicted: list[int], truth: list[int], tolerance: int = 2) -> dict[str, float]:
    """Precision, recall and F1 of cut frames, each true cut matched to at most one prediction within ``tolerance``.

    The shot-boundary scores of Radial Table 1.

    Examples:
        >>> match_cuts([10, 31, 50], [11, 30, 70], tolerance=2)
        {'precision': 0.6666666666666666, 'recall': 0.6666666666666666, 'f1': 0.6666666666666666}
    """
    return _prf(sum(matched_cuts(predicted, truth, tolerance)), len(predicted), len(truth))


def matched_cuts(predicted: list[int], truth: list[int], tolerance: int = 2) -> list[bool]:
    """Per true cut (in the order of ``truth``), whether a prediction within ``tolerance`` frames was matched
    to it; each prediction matches at most one cut (the nearest free one), as :func:`match_cuts` counts.

    Examples:
        >>> matched_cuts([10, 31, 50], [11, 30, 70], tolerance=2)
        [True, True, False]
        >>> matched_cuts([30], [29, 31])          # one prediction cannot find two cuts
        [True, False]
    """
    free = sorted(range(len(truth)), key=lambda k: truth[k])
    found = [False] * len(truth)
    for cut in sorted(predicted):
        near = [k for k in free if abs(truth[k] - cut) <= tolerance]
        if near:
            k = min(near, key=lambda k: abs(truth[k] - cut))
            free.remove(k)
            found[k] = True
    return found


def cut_recall_by_kind(predicted: list[int], video: HighlightVideo, tolerance: int = 2) -> dict[str, float]:
    """Recall of ``predicted`` cut frames on each kind of true cut (``video.cut_kinds``): the fraction of the
    cuts to another photo and of the cuts to the same photo from another set-up that were found.

    A false detection has no kind, so precision is only defined over all cuts (:func:`match_cuts`).

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> video = make_highlight_video(num_clips=6, clip_frames=(8, 9), critical_frames=4, size=16, seed=3)
        >>> video.cuts, video.cut_kinds[:3]
        ([8, 16, 25, 33, 42], ['same photo', 'same photo', 'other photo'])
        >>> cut_recall_by_kind([8, 25, 33, 40], video)
        {'other photo': 1.0, 'same photo': 0.5}
    """
    found = matched_cuts(predicted, video.cuts, tolerance)
    kinds = video.cut_kinds
    return {kind: sum(f for f, k in zip(found, kinds) if k == kind) / kinds.count(kind)
            for kind in ("other photo", "same photo") if kind in kinds}


def frame_cut_scores(step_scores: Tensor) -> Tensor:
    """Per-frame cut scores ``[T]`` from :func:`histogram_cut_scores`' ``[T - 1]`` (frame t scores the cut
    between frames t - 1 and t; frame 0 gets 0), aligned with :func:`contrast_cut_scores`.

    Examples:
        >>> frame_cut_scores(torch.tensor([0.0, 2.0, 0.0]))
        tensor([0., 0., 2., 0.])
    """
    return torch.cat([step_scores.new_zeros(1), step_scores])


def cut_auc_by_kind(scores: Tensor, video: HighlightVideo, window: int) -> dict[str, float]:
    """Threshold-free separability of a per-frame cut score ``[T]``: for each cut kind, the probability that
    a true cut frame of that kind scores above a frame far from every cut (ties count one half; the AUC).

    Negatives are the frames at least ``window`` frames from every cut and from both ends of the video (where
    window scores are undefined), so a window detector is not blamed for its spread around a cut.

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> video = make_highlight_video(num_clips=6, clip_frames=(8, 9), critical_frames=4, size=16, seed=3)
        >>> scores = torch.zeros(video.frames.shape[0])
        >>> scores[[8, 25, 33, 42]] = 1.0        # finds every cut but the second same-photo one (frame 16)
        >>> cut_auc_by_kind(scores, video, window=2)
        {'other photo': 1.0, 'same photo': 0.75}
    """
    t = scores.shape[0]
    if t != video.frames.shape[0]:
        raise ValueError(f"scores must be [T] = [{video.frames.shape[0]}] (one per frame), got {tuple(scores.shape)}")
    frames = torch.arange(t)
    cuts = torch.tensor(video.cuts)
    far = ((frames[:, None] - cuts[None]).abs() >= window).all(1) & (frames >= window) & (frames < t - window)
    negatives = scores[far]
    out = {}
    for kind in ("other photo", "same photo"):
        positives = scores[[c for c, k in zip(video.cuts, video.cut_kinds) if k == kind]]
        if len(positives):
            above = (positives[:, None] > negatives[None]).double() + 0.5 * (positives[:, None] == negatives[None])
            out[kind] = float(above.mean())
    return out


def histogram_detector(train: HighlightVideo, test: HighlightVideo, tolerance: int = 2) -> tuple[float, list[int]]:
    """The colour-histogram cut detector: its threshold tuned for F1 on the training video, and the cut frames
    it detects on the test video (a cut wherever :func:`histogram_cut_scores` exceeds the threshold).

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> train = make_highlight_video(num_clips=4, clip_frames=(12, 14), critical_frames=4, size=16, seed=0)
        >>> test = make_highlight_video(num_clips=4, clip_frames=(12, 14), critical_frames=4, size=16, seed=1)
        >>> tau, cuts = histogram_detector(train, test)
        >>> 0.0 < tau < 2.0, match_cuts(cuts, test.cuts)["recall"] > 0
        (True, True)
    """
    def cuts_above(scores: Tensor, threshold: float) -> list[int]:
        return ((scores > threshold).nonzero().flatten() + 1).tolist()

    h_train, h_test = histogram_cut_scores(train.frames), histogram_cut_scores(test.frames)
    tau = best_threshold(h_train, lambda t: match_cuts(cuts_above(h_train, t), train.cuts, tolerance))
    return tau, cuts_above(h_test, tau)


def train_window_embedding(video: HighlightVideo, frame_features: Tensor, loss: nn.Module | None, seed: int,
                           window: int = 8, steps: int = 60, fc_dim: int = 128, hidden_dim: int = 64,
                           lr: float = 3e-3) -> nn.Module:
    """A quadlet network (FC + LSTM on frozen frame features ``[T, F]``) trained on one annotated highlight
    with :class:`HighlightTask` (``loss=None``: the triplet-only baseline), in eval mode.

    AdamW with a tenth of the steps as warm-up (:func:`hapref.train.fit`).

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> video = make_highlight_video(num_clips=3, clip_frames=(20, 20), critical_frames=6, size=16)
        >>> model = train_window_embedding(video, torch.randn(60, 6), None, seed=0, window=4, steps=2,
        ...                                fc_dim=8, hidden_dim=4)
        >>> window_embeddings(model, torch.randn(60, 6), 4).shape
        torch.Size([57, 4])
    """
    from hapref.models.radial import QuadletVideoNet
    from hapref.train.loop import TrainConfig, fit

    task = HighlightTask(video, frame_features, lambda: QuadletVideoNet(frame_features.shape[1], fc_dim, hidden_dim),
                         loss, window=window, seed=seed)
    config = TrainConfig(steps=steps, lr=lr, weight_decay=1e-4, warmup_steps=max(steps // 10, 0), seed=seed)
    return fit(task, config, progress=False).model.eval()


def window_embeddings(model: nn.Module, frame_features: Tensor, window: int) -> Tensor:
    """Unit-norm embeddings ``[T - W + 1, E]`` of every stride-1 window of frame features ``[T, F]`` (Radial
    "Testing": the sliding window, stride 1), without gradients.

    Examples:
        >>> from hapref.models.radial import QuadletVideoNet
        >>> net = QuadletVideoNet(feature_dim=6, fc_dim=8, hidden_dim=4).eval()
        >>> emb = window_embeddings(net, torch.randn(10, 6), window=4)
        >>> emb.shape, torch.allclose(emb.norm(dim=1), torch.ones(7)), emb.requires_grad
        (torch.Size([7, 4]), True, False)
    """
    windows = window_features(frame_features, window)
    with torch.no_grad():
        return model.embed_features(windows, torch.full((windows.shape[0],), window))


def clips_from(cuts: list[int], length: int) -> list[tuple[int, int]]:
    """Clip spans ``[(start, end)]`` (end exclusive) of a ``length``-frame video cut at ``cuts``.

    Examples:
        >>> clips_from([10, 25], 40)
        [(0, 10), (10, 25), (25, 40)]
    """
    return list(zip([0] + list(cuts), list(cuts) + [length]))


def scan_threshold(e_train: Tensor, train: HighlightVideo, window: int) -> float:
    """The jump threshold of :func:`distance_scan` that maximises cut F1 on the training video (a grid of 30
    values in [0.05, 1.5]; unit-norm window embeddings ``[N, E]`` jump by at most 2).

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> video = make_highlight_video(num_clips=3, clip_frames=(10, 10), critical_frames=4, size=16)
        >>> emb = window_features(torch.eye(3).repeat_interleave(10, dim=0), 4).mean(1)
        >>> detect_cuts(emb, 4, scan_threshold(emb, video, 4))
        [10, 20]
    """
    return best_threshold(torch.linspace(0.05, 1.5, 30),
                          lambda t: match_cuts(detect_cuts(e_train, window, t), train.cuts))


def embedding_cut_detectors(e_train: Tensor, e_test: Tensor, train: HighlightVideo, test: HighlightVideo,
                            window: int, detectors: tuple[str, ...] = ("scan", "contrast")) -> dict[str, list[int]]:
    """The two cut detectors on window embeddings ``[N, E]``, thresholds tuned for F1 on the training video:
    ``"scan"`` (the paper's anchored scan, :func:`detect_cuts`) and ``"contrast"`` (peaks of
    :func:`contrast_cut_scores`). Returns each one's cut frames on the test video (only ``detectors``).

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> video = make_highlight_video(num_clips=3, clip_frames=(10, 10), critical_frames=4, size=16)
        >>> frames = torch.eye(3).repeat_interleave(10, dim=0)       # [30, 3]: one direction per clip
        >>> emb = window_features(frames, 4).mean(1)                 # a window = its frames' share of each clip
        >>> embedding_cut_detectors(emb, emb, video, video, window=4)
        {'scan': [10, 20], 'contrast': [10, 20]}
        >>> embedding_cut_detectors(emb, emb, video, video, window=4, detectors=("contrast",))
        {'contrast': [10, 20]}
    """
    unknown = set(detectors) - {"scan", "contrast"}
    if unknown:
        raise ValueError(f"detectors must be among ('scan', 'contrast'), got {sorted(unknown)}")
    found = {}
    if "scan" in detectors:
        found["scan"] = detect_cuts(e_test, window, scan_threshold(e_train, train, window))
    if "contrast" in detectors:
        c_train, c_test = contrast_cut_scores(e_train, window), contrast_cut_scores(e_test, window)
        tau = best_threshold(c_train, lambda t: match_cuts(peak_frames(c_train, t, window), train.cuts))
        found["contrast"] = peak_frames(c_test, tau, window)
    return found


def critical_clip_results(e_train: Tensor, e_test: Tensor, train: HighlightVideo, test: HighlightVideo,
                          window: int, train_cuts: list[int], test_cuts: list[int]) -> dict[str, float]:
    """Critical-clip detection from window embeddings, step by step (Radial "Testing": a rising curve):

    * ``"critical"``: F1 on the clips between the detected ``test_cuts``, threshold tuned on the training
      video's clips between ``train_cuts``;
    * ``"critical_true_clips"``: F1 on the true clips, threshold tuned on the training video's true clips;
    * ``"critical_oracle"``: F1 on the true clips with the best threshold for the test video itself;
    * ``"auc_true_clips"``: AUC of :func:`critical_scores` on the true test clips (no threshold).

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> video = make_highlight_video(num_clips=4, clip_frames=(12, 12), critical_frames=4, size=16, seed=2)
        >>> _ = torch.manual_seed(0)
        >>> emb = torch.randn(45, 3)
        >>> sorted(critical_clip_results(emb, emb, video, video, 4, video.cuts, video.cuts))
        ['auc_true_clips', 'critical', 'critical_oracle', 'critical_true_clips']
    """
    def f1_at(scores: Tensor, clips: list[tuple[int, int]], video: HighlightVideo):
        return lambda t: clip_critical_prf(clips, scores > t, video)

    n_train, n_test = e_train.shape[0] + window - 1, e_test.shape[0] + window - 1
    clips_train, clips_test = clips_from(train_cuts, n_train), clips_from(test_cuts, n_test)
    s_train = critical_scores(e_train, clips_train, window)
    tau = best_threshold(s_train, f1_at(s_train, clips_train, train))
    true_train = critical_scores(e_train, train.clips, window)
    true_test = critical_scores(e_test, test.clips, window)
    tau_true = best_threshold(true_train, f1_at(true_train, train.clips, train))
    tau_oracle = best_threshold(true_test, f1_at(true_test, test.clips, test))
    critical = torch.tensor(test.critical)
    above = (true_test[critical][:, None] > true_test[~critical][None]).double()
    ties = (true_test[critical][:, None] == true_test[~critical][None]).double()
    return {"critical": clip_critical_prf(clips_test, critical_scores(e_test, clips_test, window) > tau, test)["f1"],
            "critical_true_clips": clip_critical_prf(test.clips, true_test > tau_true, test)["f1"],
            "critical_oracle": clip_critical_prf(test.clips, true_test > tau_oracle, test)["f1"],
            "auc_true_clips": float((above + 0.5 * ties).mean())}


def _prf(hits: int, predicted: int, actual: int) -> dict[str, float]:
    precision = hits / predicted if predicted else 0.0
    recall = hits / actual if actual else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def clip_critical_prf(detected_clips: list[tuple[int, int]], flagged: Tensor, video: HighlightVideo) -> dict[str, float]:
    """Critical-clip detection P/R/F1: a flagged detected clip is right when the true clip it overlaps most is critical.

    The critical-clip scores of Radial Table 1.

    Examples:
        >>> from hapref.data.highlights import make_highlight_video
        >>> video = make_highlight_video(num_clips=2, clip_frames=(10, 10), critical_frames=4, size=16, seed=1)
        >>> video.critical
        [True, False]
        >>> clip_critical_prf(video.clips, torch.tensor(video.critical), video)
        {'precision': 1.0, 'recall': 1.0, 'f1': 1.0}
    """
    def best_match(start: int, end: int) -> int:
        overlaps = [min(end, e) - max(start, s) for s, e in video.clips]
        return max(range(len(overlaps)), key=overlaps.__getitem__)

    found = {best_match(s, e) for (s, e), f in zip(detected_clips, flagged.tolist()) if f}
    hits = sum(video.critical[k] for k in found)
    return _prf(hits, int(flagged.sum()), sum(video.critical))


def best_threshold(scores: Tensor, evaluate) -> float:
    """The threshold (midpoint between sorted distinct scores) that maximises ``evaluate(threshold)['f1']``.

    Examples:
        >>> scores = torch.tensor([0.1, 0.9, 0.2, 0.8])
        >>> best_threshold(scores, lambda t: match_cuts(peak_frames(scores, t, 1), [1, 3]))
        0.15000000596046448
    """
    values = scores.unique()
    candidates = ((values[1:] + values[:-1]) / 2).tolist() or values.tolist()
    return max(candidates, key=lambda t: evaluate(t)["f1"])


def mean_window_embeddings(frame_features: Tensor, window: int) -> Tensor:
    """The training-free window embedding ``[T - W + 1, F]``: each window's mean frame feature, unit norm.

    Examples:
        >>> mean_window_embeddings(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), 2)
        tensor([[1.0000, 0.0000],
                [0.7071, 0.7071]])
    """
    return torch.nn.functional.normalize(window_features(frame_features, window).mean(1), dim=-1)


def mean_std_table(results: dict[str, list[dict[str, float]]], columns: dict[str, str], digits: int = 1,
                   scale: float = 100.0, width: int = 13) -> str:
    """A text table: one row per name of ``results`` (a list of per-seed dicts), one column per ``columns``
    item (header -> key), each cell the mean ± std over seeds of ``scale * value``.

    Examples:
        >>> runs = {"radial": [{"f1": 0.5}, {"f1": 0.7}], "triplet": [{"f1": 0.4}, {"f1": 0.4}]}
        >>> print(mean_std_table(runs, {"F1 (%)": "f1"}))
                         F1 (%)
        radial      60.0 ± 14.1
        triplet      40.0 ± 0.0
    """
    from hapref.stats import format_mean_std

    lines = [" " * 10 + "".join(f"{header:>{width}s}" for header in columns)]
    for name, rows in results.items():
        cells = [format_mean_std([r[key] for r in rows], digits=digits, scale=scale) for key in columns.values()]
        lines.append(f"{name:10s}" + "".join(f"{cell:>{width}s}" for cell in cells))
    return "\n".join(lines)
