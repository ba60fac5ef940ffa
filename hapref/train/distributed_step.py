"""What the training pipelines do differently under ``torchrun``: data shards, rank streams, global-batch losses.

Every function here is the one-process behaviour when no process group exists (a plain ``python`` run,
or ``torchrun`` with one process), so a pipeline calls them unconditionally and a world of 1 trains
exactly as before. With W ranks (:mod:`hapref.distributed`):

* **data**: every step draws one permutation of the training items from the step's generator (the
  same on every rank); the global batch is its first ``W·B`` items and rank r takes rows
  ``r·B : (r+1)·B`` (:func:`rank_batch`), so the ranks' batches are disjoint and together they are
  the batch one process draws with ``W·B``;
* **random streams**: :func:`rank_stream` gives each rank its own generator for augmentations and
  samplers, derived from the step's generator;
* **global-batch losses** (``ap_scope = "global"``): :func:`hapvr_global_terms` ranks against all
  ``W·B`` videos (HAP-VR Eq. 15), :func:`global_contrastive_similarities` gives TCA every rank's keys as
  in-batch negatives and :func:`enqueue_all_ranks` feeds the memory bank with every rank's keys (TCA
  §3.4); :func:`gather_rows` lets AutoSSVH cluster the codes of the whole training set (Eq. 10).
  ``ap_scope = "per_rank"`` keeps each rank's loss on its own batch, as the released HAP-VR run does
  under DistributedDataParallel (https://github.com/yafeng19/HAP-VR, no all-gather in its loss).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hapref import distributed as hd
from hapref.losses import frame_level_ap_loss, frame_pseudo_labels, teacher_frame_similarity
from hapref.utils import at_least_float32

#: Where the ranking losses rank each query: against the global batch of all ranks, or the rank's own batch.
AP_SCOPES: tuple[str, ...] = ("global", "per_rank")


def check_ap_scope(ap_scope: object) -> str:
    """``ap_scope`` if it is one of :data:`AP_SCOPES`, else a ValueError naming them.

    Examples:
        >>> check_ap_scope("per_rank")
        'per_rank'
    """
    if ap_scope not in AP_SCOPES:
        raise ValueError(f"ap_scope must be one of {AP_SCOPES}, got {ap_scope!r}")
    return str(ap_scope)


def global_scope(ap_scope: str) -> bool:
    """True when a loss must gather the other ranks' batches (``"global"`` inside a group of several ranks).

    Examples:
        >>> global_scope("global")  # one process: nothing to gather
        False
    """
    return check_ap_scope(ap_scope) == "global" and hd.get_world_size() > 1


def rank_batch(order: Tensor, batch: int) -> Tensor:
    """This rank's ``batch`` items of the global batch: ``order[:W·batch]``, rank r's slice of it.

    ``order`` is a permutation drawn from the step's generator (the same on every rank). When it holds
    fewer than ``W·batch`` items it is repeated (as ``DistributedSampler`` pads), so every rank gets
    the same number of rows. One process: ``order[:batch]``.

    Args:
        order: [N] int64 item indices.
        batch: items per rank (B).

    Returns:
        [min(B, N)] int64 in one process, [B] with several ranks.

    Examples:
        >>> rank_batch(torch.tensor([4, 2, 0, 1, 3]), 2)
        tensor([4, 2])
    """
    if not isinstance(order, Tensor) or order.ndim != 1 or order.numel() == 0:
        raise ValueError(f"order must be a non-empty 1-d tensor of item indices, got "
                         f"{getattr(order, 'shape', type(order).__name__)}")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    world = hd.get_world_size()
    if world == 1:
        return order[:batch]
    need = world * batch
    if order.numel() < need:
        order = order.repeat(-(-need // order.numel()))
    return order[:need][hd.rank_rows(batch)]


def rank_stream(generator: torch.Generator) -> torch.Generator:
    """A generator of this rank's own, derived from the step's shared ``generator`` (which it advances).

    One process: ``generator`` itself, so one-process runs draw exactly what they drew before.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> rank_stream(g) is g
        True
    """
    if hd.get_world_size() == 1:
        return generator
    seed = int(torch.randint(0, 2 ** 62, (), generator=generator))
    return hd.rank_generator(seed)


def pool_pick(generator: torch.Generator, pool: int) -> int:
    """Index of this rank's batch in a pool of ``pool`` precomputed batches (HAP-VR's CPU profiles).

    One process: a uniform draw, as before. Several ranks: distinct batches of one shared permutation
    (repeated when the pool is smaller than the world).

    Examples:
        >>> pool_pick(torch.Generator().manual_seed(0), 4) in range(4)
        True
    """
    if hd.get_world_size() == 1:
        return int(torch.randint(0, pool, (), generator=generator))
    return int(rank_batch(torch.randperm(pool, generator=generator), 1)[0])


def block_relevance(relevance: Tensor) -> Tensor:
    """The global batch's relevance ``[W·n, W·n]``: every rank's ``[n, n]`` block on the diagonal.

    Videos of different ranks are never relevant to each other (each rank draws its own clips).

    Examples:
        >>> block_relevance(torch.eye(2, dtype=torch.bool)).shape  # one process: unchanged
        torch.Size([2, 2])
    """
    if relevance.ndim != 2 or relevance.shape[0] != relevance.shape[1]:
        raise ValueError(f"relevance must be a square [n, n] tensor, got {tuple(relevance.shape)}")
    if hd.get_world_size() == 1:
        return relevance
    blocks = hd.all_gather_tensor(relevance).split(relevance.shape[0])
    return torch.block_diag(*blocks)


def hapvr_global_terms(model: nn.Module, objective: nn.Module, features: Tensor, relevance: Tensor,
                       teacher: Tensor | None, center: bool = False) -> dict[str, Tensor]:
    """HAP-VR's Eq. 15 loss terms over the global batch of all ranks, each rank computing its query rows.

    Rank r compares its ``n`` videos with all ``N = W·n`` videos: the frame matrices ``[n, N, T, T]``
    and ψ run on its rows only (memory and work ÷ W); the video similarities ``[n, N]`` are gathered
    with gradient into the global ``[N, N]`` matrix, on which InfoNCE, SSHN and the video AP loss are
    computed identically on every rank; the frame-level AP (§3.4, Eq. 13–14 pseudo labels) averages
    over its rows with :func:`hapref.distributed.global_mean`, and the regulariser (a sum) is scaled
    by W. Averaged over ranks (the trainer averages gradients), loss and gradients equal one process's
    :class:`hapref.losses.HAPVRObjective` on the global batch.

    Args:
        model: :class:`hapref.similarity.VideoSimilarityNetwork`.
        objective: :class:`hapref.losses.HAPVRObjective`.
        features: [n, T, R, D] float, this rank's videos.
        relevance: [n, n] bool, their labels.
        teacher: [n, T, D'] float teacher frame embeddings, or None without the frame term.
        center: passed to :func:`hapref.losses.teacher_frame_similarity` (stand-in teachers are centred).

    Returns:
        The objective's terms (``infonce``, ``sshn``, ``reg``, ``video_ap``, ``frame_ap``, ``loss``).

    Examples:
        >>> from hapref.losses import HAPVRObjective, QuadLinearAP
        >>> from hapref.models.hapvr import build_hapvr_network
        >>> net, objective = build_hapvr_network(8), HAPVRObjective(QuadLinearAP(), QuadLinearAP())
        >>> x = torch.nn.functional.normalize(torch.randn(4, 4, 2, 8), dim=-1)
        >>> rel, teacher = torch.eye(4, dtype=torch.bool), torch.randn(4, 4, 6)
        >>> mine = hapvr_global_terms(net, objective, x, rel, teacher)
        >>> video_sim, frame_sims, reg = net(x)
        >>> theirs = objective(video_sim, rel, reg, frame_sims, teacher_frame_similarity(teacher))
        >>> torch.allclose(mine["loss"], theirs["loss"])
        True
    """
    world, n = hd.get_world_size(), features.shape[0]
    rows = hd.rank_rows(n)
    x = model.index(features)
    frame_rows = model.frame_similarity(x, hd.all_gather_with_grad(x))           # [n, N, T, T]
    video_rows, reg = model.video_similarity(frame_rows)                          # [n, N], sum over the rows
    video = hd.all_gather_with_grad(at_least_float32(video_rows))                           # [N, N]
    rel = block_relevance(relevance.bool())
    w = objective.weights
    hard_negative, self_sim = objective.sshn(video, rel)
    terms = {"infonce": objective.infonce(video, rel), "sshn": w.sshn * (hard_negative + self_sim),
             "reg": w.reg * at_least_float32(reg) * world}
    if objective.video_loss is not None:
        terms["video_ap"] = w.video * objective.video_loss(video, rel)
    if objective.frame_loss is not None:
        if teacher is None:
            raise ValueError("the frame-level term needs teacher [n, T, D'] frame embeddings")
        with torch.no_grad():
            similarity = teacher_frame_similarity(teacher, hd.all_gather_tensor(teacher), center=center)
            pos, neg = frame_pseudo_labels(similarity, objective.top_rate, objective.bottom_rate)
        pairs = rel[rows]
        part = frame_level_ap_loss(at_least_float32(frame_rows), pos, neg, pairs, objective.frame_loss)
        t = frame_rows.shape[-1]
        count = hd.count_ranked_queries(pos[pairs].reshape(-1, t), ~(pos | neg)[pairs].reshape(-1, t))
        terms["frame_ap"] = w.frame * hd.global_mean(part, count)
    terms["loss"] = sum(terms.values())
    return terms


def global_contrastive_similarities(query: Tensor, key: Tensor, bank: nn.Module | None,
                                    clip_ids: Tensor) -> tuple[Tensor, Tensor]:
    """TCA's ``[n, 1 + M]`` similarities with every rank's keys as in-batch negatives (TCA §3.4).

    As :func:`hapref.losses.memory_bank.contrastive_similarities` on the global batch, for this rank's
    query rows: the positive, then the keys of all ``W·n`` clips but the query's own (in global batch
    order), then the bank. Keys carry no gradient, so each rank's mean over its rows, averaged over
    ranks, is the global loss.

    Examples:
        >>> from hapref.losses.memory_bank import contrastive_similarities
        >>> q, k = torch.randn(3, 4), torch.randn(3, 4)
        >>> mine = global_contrastive_similarities(q, k, None, torch.arange(3))
        >>> all(torch.equal(a, b) for a, b in zip(mine, contrastive_similarities(q, k, None, torch.arange(3))))
        True
    """
    from hapref.losses.memory_bank import contrastive_similarities
    if hd.get_world_size() == 1:
        return contrastive_similarities(query, key, bank, clip_ids)
    n = query.shape[0]
    keys, ids = hd.all_gather_tensor(key), hd.all_gather_tensor(clip_ids.to(query.device))
    own = torch.zeros(n, keys.shape[0], dtype=torch.bool, device=query.device)
    own[torch.arange(n), torch.arange(hd.rank_rows(n).start, hd.rank_rows(n).stop)] = True
    pos = (query * key).sum(-1, keepdim=True)
    neg = [(query @ keys.to(query.dtype).T)[~own].view(n, -1)]
    neg_ids = [ids.expand(n, -1)[~own].view(n, -1)]
    if bank is not None and int(bank.count) > 0:
        bank_keys, bank_ids = bank.filled()
        neg.append(query @ bank_keys.to(query.dtype).T)
        neg_ids.append(bank_ids.expand(n, -1))
    neg_ids_all = torch.cat(neg_ids, dim=1)
    valid = (neg_ids_all != clip_ids.to(query.device).unsqueeze(1)) | (neg_ids_all < 0)
    return torch.cat([pos, *neg], dim=1), valid


def enqueue_all_ranks(bank: nn.Module, keys: Tensor, ids: Tensor, valid: Tensor | None = None) -> None:
    """Enqueue every rank's ``keys [n, D]`` and ``ids [n]`` in rank order, so all ranks' banks stay equal.

    A frame bank (``MemoryBank(..., frames=T)``) takes ``keys [n, T, D]`` and their ``valid [n, T]`` flags.

    Examples:
        >>> from hapref.losses.memory_bank import MemoryBank
        >>> bank = MemoryBank(4, 2)
        >>> enqueue_all_ranks(bank, torch.ones(3, 2), torch.tensor([-1, -2, -3]))
        >>> int(bank.count)
        3
    """
    if valid is None:
        bank.enqueue(hd.all_gather_tensor(keys), hd.all_gather_tensor(ids))
    else:
        bank.enqueue(hd.all_gather_tensor(keys), hd.all_gather_tensor(ids), hd.all_gather_tensor(valid))


def gather_rows(compute, n: int) -> Tensor:
    """``compute(rows)`` for rows ``0..n-1`` split across the ranks, gathered in row order on every rank.

    Each rank computes :func:`hapref.distributed.shard_indices` ``(n)`` (blocks differ by at most one
    row; the shorter ones are padded for the gather and trimmed). AutoSSVH encodes its training set
    this way before clustering the codes of all ranks (Eq. 10–12).

    Args:
        compute: maps an int64 row index tensor [m] to a [m, ...] tensor.
        n: number of rows.

    Examples:
        >>> gather_rows(lambda rows: rows[:, None] * 2, 3).squeeze(1)
        tensor([0, 2, 4])
    """
    world = hd.get_world_size()
    mine = hd.shard_indices(n)
    out = compute(torch.arange(mine.start, mine.stop))
    if world == 1:
        return out
    longest = -(-n // world)
    padded = torch.cat([out, out.new_zeros(longest - out.shape[0], *out.shape[1:])]) if out.shape[0] < longest else out
    parts = hd.all_gather_tensor(padded).split(longest)
    return torch.cat([part[:len(hd.shard_indices(n, r, world))] for r, part in enumerate(parts)])


def mean_terms(terms: dict[str, Tensor]) -> dict[str, float]:
    """Every loss term averaged over ranks (one all_reduce), as floats: what rank 0 logs.

    Examples:
        >>> mean_terms({"loss": torch.tensor(0.5), "vc": torch.tensor(2.0)})
        {'loss': 0.5, 'vc': 2.0}
    """
    names = list(terms)
    values = torch.stack([terms[k].detach().double().cpu().reshape(()) for k in names])
    if hd.get_world_size() > 1:
        values = values.to(hd.rank_device())
        torch.distributed.all_reduce(values)
        values = values.cpu() / hd.get_world_size()
    return dict(zip(names, values.tolist()))


def gather_objects(obj: object) -> list | None:
    """Every rank's ``obj`` on rank 0 (in rank order), None on the others: the RNG states a checkpoint keeps.

    Examples:
        >>> gather_objects({"step": 3})
        [{'step': 3}]
    """
    if hd.get_world_size() == 1:
        return [obj]
    out = [None] * hd.get_world_size() if hd.is_main_process() else None
    torch.distributed.gather_object(obj, out, dst=0)
    return out


__all__ = ["AP_SCOPES", "block_relevance", "check_ap_scope", "enqueue_all_ranks", "gather_rows",
           "gather_objects", "global_contrastive_similarities", "global_scope", "hapvr_global_terms", "mean_terms",
           "pool_pick", "rank_batch", "rank_stream"]
