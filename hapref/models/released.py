"""Released S2VS and HAP-VR similarity networks as :class:`hapref.similarity.VideoSimilarityNetwork`.

The official checkpoints (S2VS ``s2vs_dns.pth`` / ``s2vs_vcdb.pth``, https://github.com/gkordo/s2vs;
HAP-VR ``ckpt/model.pth``, https://github.com/yafeng19/HAP-VR) store the ViSiL-style network of HAP-VR
§3.3.1 (Eq. 3–5) under their own key names. :func:`hapref.models.load_released_network` maps them onto hapref's
modules and sets what the released evaluation does: floor-mode ψ, ``hardtanh`` scores in [−1, 1],
Chamfer (S2VS) or TopK-Chamfer at the stored rates (HAP-VR), and the loaders' minimum length.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import torch
from torch import Tensor

from hapref.similarity.network import VideoSimilarityNetwork

SOURCES: tuple[str, ...] = ("s2vs", "hapvr")
#: Minimum number of frames of the released HDF5 loaders (shorter videos are tiled by doubling).
MIN_LEN: dict[str, int] = {"s2vs": 4, "hapvr": 8}
#: Released key prefix -> hapref module path.
_RENAMES: tuple[tuple[str, str], ...] = (
    ("attention.transform.", "attention.proj."),
    ("attention.context_vector.", "attention.context."),
    ("visil_head.", "comparator."),
    ("comparator_module.", "comparator."),
)
_MODULES = ("Chamfer", "TopKChamfer")


def released_state_dict(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """A released S2VS / HAP-VR ``state_dict`` with hapref's key names (``module.`` prefixes dropped).

    ``attention.transform`` → ``attention.proj``, ``attention.context_vector`` → ``attention.context``,
    ``visil_head`` (S2VS) / ``comparator_module`` (HAP-VR) → ``comparator`` (ψ of HAP-VR Eq. 4).

    Examples:
        >>> import torch
        >>> sorted(released_state_dict({"attention.context_vector.weight": torch.zeros(1, 4),
        ...                              "visil_head.fconv.bias": torch.zeros(1)}))
        ['attention.context.weight', 'comparator.fconv.bias']
    """
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict of tensors, got {type(state).__name__}")
    out = {}
    for key, value in state.items():
        new = key.removeprefix("module.")
        for old, repl in _RENAMES:
            if new.startswith(old):
                new = repl + new[len(old):]
                break
        out[new] = value
    return out


#: Arguments of the released ``train.py`` that fix the network, per source (S2VS: gkordo/s2vs ``train.py``;
#: HAP-VR adds the region / temporal similarity modules). A checkpoint holding ``args`` must have all of them.
REQUIRED_ARGS: dict[str, tuple[str, ...]] = {
    "s2vs": ("similarity_network", "dims", "attention", "binarization"),
    "hapvr": ("similarity_network", "dims", "attention", "binarization", "f2f_sim_module", "v2v_sim_module"),
}


def _load(path: Path, source: str) -> dict:
    """``torch.load(weights_only=True)`` with only ``argparse.Namespace`` allowed besides plain values (the
    ``args`` the released ``train.py`` saves); anything else is refused with the global it names."""
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # an unpickling error names the disallowed global
        found = re.search(r"GLOBAL ([\w.]+)", str(err)) or re.search(r"global ['\"]?([\w.]+)", str(err))
        what = (f"it pickles {found.group(1)}, which hapref does not unpickle (only tensors, plain values and "
                "argparse.Namespace)" if found else f"it cannot be read safely ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''})")
        raise ValueError(f"{path} is not a released {source} checkpoint: {what}") from None


def _arguments(args: object, source: str, path: Path) -> dict:
    """The saved training arguments as a dict; every field of :data:`REQUIRED_ARGS` must be there."""
    if not isinstance(args, argparse.Namespace):
        raise ValueError(f"{path}: 'args' must be an argparse.Namespace (what the released train.py saves), "
                         f"got {type(args).__name__}")
    values = vars(args)
    missing = [name for name in REQUIRED_ARGS[source] if name not in values]
    if source == "hapvr":
        missing += [rate for module, rate in (("f2f_sim_module", "f_topk_rate"), ("v2v_sim_module", "v_topk_rate"))
                    if values.get(module) == "TopKChamfer" and rate not in values]
    if missing:
        hint = (" (an S2VS train.py checkpoint? load it with source='s2vs' / --released s2vs)"
                if source == "hapvr" and {"f2f_sim_module", "v2v_sim_module"} & set(missing) else "")
        raise ValueError(f"{path}: the saved args lack {', '.join(missing)}, needed to build the {source} network; "
                         f"hapref fills in no defaults{hint}")
    if values["similarity_network"] != "ViSiL":
        raise ValueError(f"{path}: args.similarity_network must be 'ViSiL', got {values['similarity_network']!r}")
    for flag in ("binarization", "mlp", "batch_norm", "symmetric", "attention_norm"):
        if values.get(flag, False):
            raise ValueError(f"{path}: args.{flag}=True is not supported (only the released configuration with "
                             f"{flag}=False is)")
    return values


def _s2vs_settings(values: dict, path: Path) -> None:
    """An S2VS checkpoint's args must not ask for HAP-VR's TopK modules (they would be ignored)."""
    topk = {name: values[name] for name in ("f2f_sim_module", "v2v_sim_module")
            if name in values and values[name] != "Chamfer"}
    if topk:
        raise ValueError(f"{path}: args {', '.join(f'{k}={v!r}' for k, v in topk.items())} contradict the S2VS "
                         "network (Chamfer at both levels): a HAP-VR checkpoint? load it with source='hapvr'")


def _hapvr_settings(values: dict) -> dict:
    """Network settings from HAP-VR's stored training arguments (checked by :func:`_arguments`)."""
    modules = {name: values[name] for name in ("f2f_sim_module", "v2v_sim_module")}
    for name, module in modules.items():
        if module not in _MODULES:
            raise ValueError(f"args.{name} must be one of {_MODULES}, got {module!r}")
    rate = {"f2f_sim_module": "f_topk_rate", "v2v_sim_module": "v_topk_rate"}
    k = {name: (float(values[rate[name]]) if modules[name] == "TopKChamfer" else 0.0) for name in modules}
    return {"dims": int(values["dims"]), "attention": bool(values["attention"]),
            "spatial_k": k["f2f_sim_module"], "temporal_k": k["v2v_sim_module"]}


def load_released_network(path: str | os.PathLike, source: str) -> VideoSimilarityNetwork:
    """The released S2VS or HAP-VR similarity network of a checkpoint file, in eval mode (HAP-VR §3.3.1, Eq. 3–5).

    ``source``:

    - ``"s2vs"``: ``{'model': state_dict}`` (``s2vs_dns.pth`` / ``s2vs_vcdb.pth``), or what S2VS's
      ``train.py`` saves (``{'args', 'model', 'optimizer', 'global_step'}``, its ``args`` checked against
      the weights): attention when its keys are present, Chamfer over regions and over ψ's output, minimum
      length 4;
    - ``"hapvr"``: ``{'model', 'args', 'optimizer', 'global_step'}`` (``ckpt/model.pth``): dims, attention
      and the region / temporal modules (``'Chamfer'`` or ``'TopKChamfer'`` at ``f_topk_rate`` /
      ``v_topk_rate``) read from ``args``, minimum length 8.

    Loading is ``torch.load(..., weights_only=True)`` with only ``argparse.Namespace`` allow-listed. The
    architecture comes from the saved arguments: one of :data:`REQUIRED_ARGS` missing, or contradicting the
    weights (``attention``, ``dims``) or the source (an S2VS checkpoint with TopK modules), is a ValueError
    naming it; no default is filled in.

    The network scores like the released ``calculate_video_similarity``: floor-mode ψ and
    ``hardtanh`` in [−1, 1] (``signed_scores=True``). Score databases with
    :func:`hapref.evaluation.similarities`, which also tiles short videos to ``min_len`` and averages
    2048-frame target chunks as the released evaluation loop does.

    Examples:
        >>> import tempfile, torch
        >>> from hapref.similarity import VideoSimilarityNetwork
        >>> net = VideoSimilarityNetwork(dims=8, attention=True)
        >>> rename = {"attention.proj": "attention.transform", "attention.context": "attention.context_vector"}
        >>> state = {}
        >>> for key, value in net.state_dict().items():  # written with the released S2VS key names
        ...     module, leaf = key.rsplit(".", 1)
        ...     state[f"{rename.get(module, module.replace('comparator', 'visil_head'))}.{leaf}"] = value
        >>> path = tempfile.mktemp(suffix=".pth")
        >>> torch.save({"model": state}, path)
        >>> released = load_released_network(path, "s2vs")
        >>> released.signed_scores, released.min_len, released.spatial_k, released.temporal_k
        (True, 4, 0.0, 0.0)
        >>> torch.equal(released.comparator.conv2.weight, net.comparator.conv2.weight)
        True
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must be an existing checkpoint file, got {str(path)!r}")
    checkpoint = _load(path, source)
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("model"), dict):
        keys = sorted(checkpoint)[:5] if isinstance(checkpoint, dict) else "-"
        raise ValueError(f"{path} must hold a dict with a 'model' state dict (the released layout), "
                         f"got {type(checkpoint).__name__} with keys {keys}")
    state = released_state_dict(checkpoint["model"])
    has_attention = "attention.proj.weight" in state
    stored_dims = state["attention.proj.weight"].shape[1] if has_attention else None
    if source == "hapvr" and "args" not in checkpoint:
        raise ValueError(f"{path} has no 'args': not a HAP-VR checkpoint (use source='s2vs' for {{'model': ...}})")
    values = _arguments(checkpoint["args"], source, path) if "args" in checkpoint else None
    if source == "hapvr":
        settings = _hapvr_settings(values)
    else:
        if values is not None:
            _s2vs_settings(values, path)
        settings = {"dims": stored_dims, "attention": has_attention, "spatial_k": 0.0, "temporal_k": 0.0}
    if values is not None:
        if bool(values["attention"]) != has_attention:
            raise ValueError(f"{path}: args.attention={values['attention']} but the state dict "
                             f"{'has' if has_attention else 'lacks'} attention weights")
        if has_attention and int(values["dims"]) != stored_dims:
            raise ValueError(f"{path}: args.dims={values['dims']} but the attention weights are "
                             f"{stored_dims}-dimensional")
    net = VideoSimilarityNetwork(dims=settings["dims"], spatial_k=settings["spatial_k"],
                                 temporal_k=settings["temporal_k"], attention=settings["attention"],
                                 signed_scores=True, min_len=MIN_LEN[source])
    try:
        missing, unexpected = net.load_state_dict(state, strict=False)
    except RuntimeError as err:  # shape mismatches
        raise ValueError(f"{path} does not match the released {source} layout: {err}") from err
    if missing or unexpected:
        raise ValueError(f"{path} does not match the released {source} layout: missing {sorted(missing)}, "
                         f"unexpected {sorted(unexpected)}")
    return net.eval()
