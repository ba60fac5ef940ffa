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
    free = sorted(truth)
    hits = 0
    for cut in sorted(predicted):
        near = [t for t in free if abs(t - cut) <= tolerance]
        if near:
            free.remove(min(near, key=lambda t: abs(t - cut)))
            hits += 1
    return _prf(hits, len(predicted), len(truth))


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
