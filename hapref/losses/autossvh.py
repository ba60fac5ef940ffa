"""AutoSSVH's objective: frame reconstruction, view contrast, component voting and P2Set (Eq. 10–17).

Codes are ``[N, K]`` tensors; binary codes hold ±1 (straight-through during training, see
:func:`hapref.models.autossvh.binarize_st`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.similarity.pairwise import l2_normalize
from hapref.utils import float32_compute
from hapref.validation import check_float_tensor, renamed_keywords

__all__ = ["LOSS_WEIGHTS", "AutoSSVHWeights", "autossvh_loss", "component_vote", "dcl_loss", "frame_reconstruction",
           "kmeans_clusters", "p2set_loss", "view_contrast"]


@dataclass(frozen=True)
class AutoSSVHWeights:
    """α (view contrast) and β (P2Set) of AutoSSVH Eq. 17, with the view contrast's temperature τ and DCL's
    positive prior τ⁺ (the released configs' ``tau`` and ``tau_plus``).

    Examples:
        >>> AutoSSVHWeights(alpha=0.2, beta=0.01)
        AutoSSVHWeights(alpha=0.2, beta=0.01, temperature=0.5, positive_prior=0.1)
    """

    alpha: float = 1.0
    beta: float = 0.2
    temperature: float = 0.5
    positive_prior: float = 0.1


# The old keywords raise a TypeError naming the new ones.
_renamed = renamed_keywords(tau="temperature", tau_plus="positive_prior")
AutoSSVHWeights.__init__ = _renamed(AutoSSVHWeights.__init__)  # type: ignore[method-assign]


#: Per-dataset weights of the released configs (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH).
LOSS_WEIGHTS: dict[str, AutoSSVHWeights] = {
    "ucf101": AutoSSVHWeights(1.0, 0.2, 0.5, 0.1),
    "hmdb51": AutoSSVHWeights(1.0, 0.2, 0.5, 0.1),
    "activitynet": AutoSSVHWeights(0.2, 0.01, 0.5, 0.05),
    "fcvid": AutoSSVHWeights(1.0, 0.01, 0.5, 0.1),  # α = 1.0 as released; the paper gives FCVID α = 0.2
}


@float32_compute
def frame_reconstruction(pred: Tensor, target: Tensor, per_dim: bool = True) -> Tensor:
    """FR loss (AutoSSVH Eq. 13): mean over videos and dropped frames of ``||v - v̂||²``.

    ``pred`` and ``target`` are ``[N, T_drop, D]`` float features. ``per_dim=True`` also divides by the
    feature size D (the released ``MSELoss``), keeping the term of order 1 whatever D is; ``False`` is
    the literal Eq. 13. Empty (no dropped frame) -> 0. Half precision is computed (and returned) in float32.

    Examples:
        >>> pred, target = torch.zeros(1, 2, 4), torch.ones(1, 2, 4)
        >>> frame_reconstruction(pred, target), frame_reconstruction(pred, target, per_dim=False)
        (tensor(1.), tensor(4.))
    """
    pred = _promote(check_float_tensor(pred, "pred", 3, finite=True))
    target = check_float_tensor(target, "target", None, finite=True)
    if target.shape != pred.shape:
        raise ValueError(f"target must have the shape of pred {tuple(pred.shape)}, got {tuple(target.shape)}")
    if pred.numel() == 0:
        return pred.sum()
    sq = (pred - target.to(pred.dtype)).square()
    return sq.mean() if per_dim else sq.sum(-1).mean()


def _promote(x: Tensor) -> Tensor:
    """float16/bfloat16 -> float32 (normalisation epsilons and exponentials need its range)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _pair_similarity(b1: Tensor, b2: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    b1 = _promote(check_float_tensor(b1, "b1", 2, finite=True))
    b2 = _promote(check_float_tensor(b2, "b2", None, finite=True))
    if b2.shape != b1.shape:
        raise ValueError(f"b2 must have the shape of b1 {tuple(b1.shape)}, got {tuple(b2.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = l2_normalize(torch.cat([b1, b2.to(b1.dtype)]))  # a zero code: cosine 0, finite gradient
    n = b1.shape[0]
    partner = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(b1.device)
    return z @ z.T / temperature, partner


@renamed_keywords(tau="temperature")
@float32_compute
def view_contrast(b1: Tensor, b2: Tensor, temperature: float = 0.5) -> Tensor:
    """VC loss, the paper's InfoNCE form (AutoSSVH Eq. 14–15) on the codes of two views [N, K].

    Each of the 2N codes has its other view as positive and the 2N − 2 remaining codes as
    negatives; similarity is the cosine over the ``temperature`` τ. Fewer than 2 videos -> 0. Codes are
    ``[N, K]`` floats;
    half precision is computed (and returned) in float32.

    Examples:
        >>> b = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
        >>> round(view_contrast(b, b, temperature=0.5).item(), 4)  # each code: log(1 + 2 e^-2)
        0.2395
    """
    logits, partner = _pair_similarity(b1, b2, temperature)
    if b1.shape[0] < 2:
        return logits.sum() * 0
    logits = logits.masked_fill(torch.eye(len(logits), dtype=torch.bool, device=logits.device), float("-inf"))
    return F.cross_entropy(logits, partner)


@renamed_keywords(tau="temperature", tau_plus="positive_prior")
@float32_compute
def dcl_loss(b1: Tensor, b2: Tensor, temperature: float = 0.5, positive_prior: float = 0.1) -> Tensor:
    """Debiased contrastive VC loss (Chuang et al. 2020), the released code's form (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH).

    ``Ng = max((Σ_neg e^{s} − τ⁺·n·e^{s⁺}) / (1 − τ⁺), n·e^{−1/τ})`` with n = 2N − 2 negatives and
    ``L = mean(−log(e^{s⁺} / (e^{s⁺} + Ng)))`` with ``temperature`` τ and ``positive_prior`` τ⁺ (the prior
    probability that a negative shares the anchor's class); τ⁺ = 0 gives back :func:`view_contrast`.
    Every exponential is taken relative to the row's shift c, the largest logit among the entries the row
    uses (its positive and its n negatives; not the self-similarity 1/τ, which would put the positive and
    the floor at up to 2/τ below c): no exponential exceeds 1, and ``e^{s⁺−c} + Ng·e^{−c}`` stays at least
    ``min(1/2, 1/(2τ⁺n))``, so neither the loss nor its gradient overflows or underflows for finite codes
    whenever 1/τ fits the dtype (tested in float32 down to τ = 0.005, within 1e-4 of a float64 evaluation).
    At small τ the floor ``n·e^{−1/τ−c}`` may round to 0; it is then far below that bound, so the loss moves
    by less than its rounding. Half-precision codes are computed in, and give, a float32 loss.

    Examples:
        >>> b = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
        >>> dcl_loss(b, b, temperature=0.5, positive_prior=0.0).item() == view_contrast(b, b, temperature=0.5).item()
        True
    """
    if not 0 <= positive_prior < 1:
        raise ValueError(f"positive_prior must lie in [0, 1), got {positive_prior}")
    logits, partner = _pair_similarity(b1, b2, temperature)
    if b1.shape[0] < 2:
        return logits.sum() * 0
    n = len(logits) - 2
    rows = torch.arange(len(logits), device=logits.device)
    pos = logits[rows, partner]
    negative = torch.ones_like(logits, dtype=torch.bool)
    negative[rows, rows] = False
    negative[rows, partner] = False
    # Everything relative to the row's shift c, the largest logit it uses (positive and negatives, not the
    # self logit): e^{x} = e^{c} e^{x - c}. Either e^{s⁺-c} = 1 or Σ_neg e^{s-c} >= 1, so the sum below is
    # bounded away from 0 (see the docstring) and its log and gradient stay finite.
    masked = logits.masked_fill(~negative, float("-inf"))
    shift = torch.maximum(pos, masked.amax(-1)).detach()
    neg = (masked - shift[:, None]).exp().sum(-1)
    pos_e = (pos - shift).exp()
    floor = n * torch.exp(-1 / temperature - shift)
    ng = torch.maximum((neg - positive_prior * n * pos_e) / (1 - positive_prior), floor)
    return (torch.log(pos_e + ng) - (pos - shift)).mean()


def component_vote(codes: Tensor, labels: Tensor, num_clusters: int | None = None) -> Tensor:
    """Voted cluster centres (AutoSSVH Eq. 10–12): per bit, +1 if at least half the members say +1.

    Args:
        codes: [N, K] codes in {±1}.
        labels: [N] cluster ids in ``[0, num_clusters)``.
        num_clusters: number of centres (default ``labels.max() + 1``); an empty cluster gets all +1.

    Returns:
        [C, K] centres in {±1}. The vote minimises the summed Hamming distance to the members
        (Eq. 24–37): each bit is chosen independently and the majority value costs least.

    Examples:
        >>> codes = torch.tensor([[1.0, -1.0], [1.0, 1.0], [-1.0, -1.0], [-1.0, -1.0]])
        >>> component_vote(codes, torch.tensor([0, 0, 0, 1]))
        tensor([[ 1., -1.],
                [-1., -1.]])
    """
    codes = check_float_tensor(codes, "codes", 2)
    if not isinstance(labels, Tensor):
        raise TypeError(f"labels must be a torch.Tensor of [N] cluster ids, got {type(labels).__name__}")
    if labels.shape != codes.shape[:1] or labels.dtype in (torch.bool,) or labels.is_floating_point():
        raise ValueError(f"labels must be [N={codes.shape[0]}] integer cluster ids, got {labels.dtype} "
                         f"{tuple(labels.shape)}")
    if not ((codes == 1) | (codes == -1)).all():
        raise ValueError("codes must hold only -1/+1")
    c = int(labels.max()) + 1 if num_clusters is None and len(labels) else (num_clusters or 0)
    if len(labels) and (labels.min() < 0 or labels.max() >= c):
        raise ValueError(f"labels must lie in [0, num_clusters={c})")
    votes = codes.new_zeros(c, codes.shape[1]).index_add_(0, labels.to(codes.device), codes)
    return torch.where(votes >= 0, 1.0, -1.0).to(codes.dtype)


def kmeans_clusters(codes: Tensor, num_clusters: int, seed: int = 0) -> Tensor:
    """k-means cluster ids [N] (int64) of codes [N, K] (scikit-learn, deterministic in ``seed``), the pseudo labels
    of P2Set (AutoSSVH Eq. 10).

    Examples:
        >>> codes = torch.tensor([[1.0, 1.0], [1.0, 0.9], [-1.0, -1.0], [-0.9, -1.0]])
        >>> ids = kmeans_clusters(codes, 2)
        >>> bool(ids[0] == ids[1]) and bool(ids[2] == ids[3]) and bool(ids[0] != ids[2])
        True
    """
    from sklearn.cluster import KMeans

    codes = check_float_tensor(codes, "codes", 2)
    if not 1 <= num_clusters <= codes.shape[0]:
        raise ValueError(f"num_clusters must lie in [1, N={codes.shape[0]}], got {num_clusters}")
    data = codes.detach().double().cpu().numpy()
    labels = KMeans(num_clusters, n_init=3, random_state=seed).fit_predict(data)
    return torch.from_numpy(np.asarray(labels, dtype=np.int64)).to(codes.device)


@renamed_keywords(tau="temperature")
@float32_compute
def p2set_loss(codes: Tensor, assigned: Tensor, centres: Tensor, temperature: float = 0.2) -> Tensor:
    """P2Set loss (AutoSSVH Eq. 16) for one clustering, averaged over the codes.

    ``−log( e^{cos(b_i, c_{y_i})/τ} / Σ_m e^{cos(b_i, c_m)/τ} )``: pull every code to its voted
    centre and away from the other centres (``temperature`` τ). Sum over several clusterings is the caller's.

    Args:
        codes: [N, K] (straight-through binary) codes.
        assigned: [N] integer cluster ids of the codes, each in ``[0, C)``.
        centres: [C, K] voted centres.

    Returns:
        0-d tensor (float32 for half-precision codes).

    Examples:
        >>> codes = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])
        >>> round(p2set_loss(codes, torch.tensor([0, 1]), codes, temperature=0.2).item(), 6)  # log(1 + e^-10)
        4.5e-05
    """
    codes = _promote(check_float_tensor(codes, "codes", 2, finite=True))
    centres = check_float_tensor(centres, "centres", 2, finite=True)
    if centres.shape[1] != codes.shape[1]:
        raise ValueError(f"centres must be [C, K={codes.shape[1]}], got {tuple(centres.shape)}")
    if not isinstance(assigned, Tensor) or assigned.shape != codes.shape[:1] or assigned.is_floating_point() \
            or assigned.dtype == torch.bool:
        raise ValueError(f"assigned must be [N={codes.shape[0]}] integer cluster ids, got "
                         f"{tuple(assigned.shape) if isinstance(assigned, Tensor) else type(assigned).__name__}")
    if len(assigned) and (assigned.min() < 0 or assigned.max() >= centres.shape[0]):
        raise ValueError(f"assigned must hold cluster ids in [0, C={centres.shape[0]}), got values in "
                         f"[{int(assigned.min())}, {int(assigned.max())}]")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if codes.shape[0] == 0:
        return codes.sum()
    logits = l2_normalize(codes) @ l2_normalize(centres.to(codes.dtype)).T / temperature
    return F.cross_entropy(logits, assigned.to(codes.device))


@float32_compute
def autossvh_loss(fr: Tensor, vc: Tensor, p2set: Tensor, weights: AutoSSVHWeights) -> Tensor:
    """``L = L_FR + α·L_VC + β·L_P2Set`` (AutoSSVH Eq. 17) from the three 0-d loss terms.

    Examples:
        >>> autossvh_loss(torch.tensor(1.0), torch.tensor(2.0), torch.tensor(5.0), LOSS_WEIGHTS["ucf101"])
        tensor(4.)
    """
    return fr + weights.alpha * vc + weights.beta * p2set
