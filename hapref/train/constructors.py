"""The constructors a run folder may name: ``config.json`` is data, never an import path.

:func:`hapref.train.load_run` rebuilds a model from the ``"factory"`` and ``"kwargs"`` that
:meth:`Task.model_spec` recorded. Run folders are shared like checkpoints, so the factory is looked up in
:data:`MODEL_CONSTRUCTORS` (an allow-list of hapref's model constructors, by name) and every keyword
argument is checked against the constructor's signature and annotation before anything is called. A
name outside the list, an unknown argument or a value of the wrong type is a ``ValueError`` that names the
field of ``config.json``.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable
from typing import Any

__all__ = ["MODEL_CONSTRUCTORS", "PREPROCESS_CONSTRUCTORS", "checked_call", "resolve"]

#: Model constructors a run folder may name (the four pipelines' ``model_spec()["factory"]``).
MODEL_CONSTRUCTORS: frozenset[str] = frozenset({
    "hapref.models.hapvr:build_hapvr_network",
    "hapref.train.tca:build_model",
    "hapref.models.radial:QuadletVideoNet",
    "hapref.models.radial:DescriptorHead",         # Radial with head=linear / head=weighting
    "hapref.models.radial:MeanDiffPooling",        # Radial with head=meandiff
    "hapref.train.radial:end_to_end_network",      # Radial with finetune_backbone=true (CNN weights in the run)
    "hapref.models.autossvh:AutoSSVHNet",
})
#: Preprocessing modules a run folder may name (rebuilt from tensors of the checkpoint).
PREPROCESS_CONSTRUCTORS: frozenset[str] = frozenset({"hapref.features.whitening:PCAWhitening"})

_JSON_SCALARS = (bool, int, float, str, type(None))


def resolve(name: object, allowed: frozenset[str], field: str) -> Callable[..., Any]:
    """The constructor named ``name`` if it is in ``allowed``; else a ValueError naming ``field``.

    Examples:
        >>> resolve("hapref.models.radial:QuadletVideoNet", MODEL_CONSTRUCTORS, "model.factory").__name__
        'QuadletVideoNet'
        >>> resolve("hapref.data.download:download", MODEL_CONSTRUCTORS, "model.factory")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: model.factory must be one of hapref's model constructors (...), got 'hapref.data.download:download'
    """
    if not isinstance(name, str) or name not in allowed:
        raise ValueError(f"{field} must be one of hapref's model constructors ({', '.join(sorted(allowed))}), "
                         f"got {name!r}")
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def _json_value(value: object) -> bool:
    if isinstance(value, _JSON_SCALARS):
        return True
    if isinstance(value, list):
        return all(_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_value(v) for k, v in value.items())
    return False


def _matches(value: object, annotation: object) -> bool:
    """Whether a JSON ``value`` fits a simple annotation (unknown annotations accept any JSON value)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return any(_matches(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin in (tuple, list):
        return isinstance(value, list)
    return True


def checked_call(fn: Callable[..., Any], kwargs: object, field: str, tensors: bool = False) -> Any:
    """``fn(**kwargs)`` after checking every argument against ``fn``'s signature; errors name ``field.<arg>``.

    With ``tensors`` the values must be tensors (a checkpoint's state); otherwise JSON values whose type fits
    the parameter's annotation (``int``, ``float``, ``bool``, ``str``, ``None``, lists for tuples).

    Examples:
        >>> from hapref.models.radial import QuadletVideoNet
        >>> type(checked_call(QuadletVideoNet, {"feature_dim": 8, "fc_dim": 6, "hidden_dim": 4}, "model.kwargs"))
        <class 'hapref.models.radial.QuadletVideoNet'>
        >>> checked_call(QuadletVideoNet, {"feature_dim": "8"}, "model.kwargs")
        Traceback (most recent call last):
        ...
        ValueError: model.kwargs.feature_dim must be of type int, got '8'
        >>> checked_call(QuadletVideoNet, {"path": "/tmp/x"}, "model.kwargs")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: model.kwargs.path is not an argument of QuadletVideoNet (its arguments: ...)
    """
    import torch

    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ValueError(f"{field} must be an object of keyword arguments, got {type(kwargs).__name__}")
    target = fn.__init__ if inspect.isclass(fn) else fn
    signature = inspect.signature(target)
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # an annotation that does not evaluate: check names only
        hints = {}
    params = {n: p for n, p in signature.parameters.items() if n != "self"
              and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    name = getattr(fn, "__name__", repr(fn))
    for key, value in kwargs.items():
        if key not in params:
            raise ValueError(f"{field}.{key} is not an argument of {name} (its arguments: {', '.join(params)})")
        if tensors:
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"{field}.{key} must be a tensor, got {type(value).__name__}")
            continue
        annotation = hints.get(key, inspect.Parameter.empty)
        if not _json_value(value) or not _matches(value, annotation):
            expected = getattr(annotation, "__name__", str(annotation))
            raise ValueError(f"{field}.{key} must be of type {expected}, got {value!r}")
    missing = [n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in kwargs]
    if missing:
        raise ValueError(f"{field} lacks the required argument(s) {', '.join(missing)} of {name}")
    return fn(**kwargs)
