"""Input checks shared by metrics and losses: clear errors that name the argument."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor

F = TypeVar("F", bound=Callable)

#: What each keyword of hapref's vocabulary means; old keywords are refused with this text.
KEYWORD_MEANINGS = {
    "ignore": "bool, True = leave the entry out of the ranking or the loss",
    "valid": "bool, True = a real frame or item, False = padding",
    "temperature": "τ > 0, the scores are divided by it",
    "scale": "γ > 0, the logits are multiplied by it",
    "positive_prior": "τ⁺ in [0, 1), the prior probability that a negative shares the anchor's class",
}


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """Refuse keywords that were renamed, with a ``TypeError`` naming the new keyword and its meaning.

    ``mask`` used to mean "leave out" in the losses and metrics and "real frame" in the similarity
    functions; it became ``ignore`` and ``valid``. The losses' hyper-parameters were renamed to one
    vocabulary (``tau`` -> ``temperature``, Circle's ``gamma`` -> ``scale`` and ``m`` -> ``margin``, ...;
    see the naming table of the API reference). The wrapped signature is unchanged.

    Examples:
        >>> @renamed_keywords(mask="ignore")
        ... def f(x, ignore=None):
        ...     return x
        >>> f(1, mask=None)
        Traceback (most recent call last):
        ...
        TypeError: f() takes no keyword 'mask': it is now 'ignore' (bool, True = leave the entry out of the ranking or the loss)
        >>> @renamed_keywords(tau="temperature")
        ... def g(x, temperature=0.1):
        ...     return x / temperature
        >>> g(1.0, tau=0.5)
        Traceback (most recent call last):
        ...
        TypeError: g() takes no keyword 'tau': it is now 'temperature' (τ > 0, the scores are divided by it)
    """
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                if old in kwargs:
                    meaning = KEYWORD_MEANINGS.get(new)
                    raise TypeError(f"{fn.__qualname__}() takes no keyword '{old}': it is now '{new}'"
                                    + (f" ({meaning})" if meaning else ""))
            return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]
    return decorate


def as_tensor(x: object) -> object:
    """``x`` as a tensor when it is a NumPy array (sharing its memory), otherwise ``x`` unchanged.

    Lets metrics and losses take NumPy arrays; anything else is left for the checks to refuse.

    Examples:
        >>> import numpy as np
        >>> as_tensor(np.array([0.5, 0.25]))
        tensor([0.5000, 0.2500], dtype=torch.float64)
        >>> as_tensor([1, 2])
        [1, 2]
    """
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    return x


def check_float_tensor(x: object, name: str, ndim: int | tuple[int, ...] | None = None,
                       allow_nan: bool = False, finite: bool = False) -> Tensor:
    """Return ``x`` if it is a floating tensor of the given rank(s) without NaN, else raise.

    A NumPy array is converted to a tensor first (so use the returned value). ``finite`` also refuses
    ±inf (losses, whose value and gradient would be NaN). Not a tensor -> ``TypeError``; wrong dtype,
    rank, NaN or inf -> ``ValueError``; the message names the argument and the expected form.

    Examples:
        >>> check_float_tensor(torch.zeros(2, 3), "scores", ndim=2).shape
        torch.Size([2, 3])
        >>> check_float_tensor(torch.zeros(3), "scores", ndim=2)
        Traceback (most recent call last):
        ...
        ValueError: scores must have 2 dimension(s), got shape (3,)
        >>> check_float_tensor(torch.tensor([1.0, float("inf")]), "scores", finite=True)
        Traceback (most recent call last):
        ...
        ValueError: scores must be finite (got ±inf)
    """
    x = as_tensor(x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must have a floating dtype (float16/32/64), got {x.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if x.ndim not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dimension(s), "
                             f"got shape {tuple(x.shape)}")
    if not allow_nan and torch.isnan(x).any():
        raise ValueError(f"{name} contains NaN")
    if finite and torch.isinf(x).any():
        raise ValueError(f"{name} must be finite (got ±inf)")
    return x


def check_binary(x: object, name: str, shape: torch.Size) -> Tensor:
    """Return ``x`` as a bool tensor of ``shape``; it may be bool or hold only 0/1 values (tensor or NumPy array).

    Examples:
        >>> check_binary(torch.tensor([0, 1, 1]), "relevance", torch.Size([3]))
        tensor([False,  True,  True])
        >>> check_binary(torch.tensor([0, 2]), "relevance", torch.Size([2]))
        Traceback (most recent call last):
        ...
        ValueError: relevance must be boolean or hold only 0/1 values (dtype torch.int64)
    """
    x = as_tensor(x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array, got {type(x).__name__}")
    if x.shape != shape:
        raise ValueError(f"{name} must have shape {tuple(shape)} (that of the scores), got {tuple(x.shape)}")
    if x.dtype == torch.bool:
        return x
    if x.is_complex() or not ((x == 0) | (x == 1)).all():
        raise ValueError(f"{name} must be boolean or hold only 0/1 values (dtype {x.dtype})")
    return x.bool()


def check_scores_relevance(scores: object, relevance: object, ignore: object = None, ndim: int = 2,
                           finite: bool = False) -> tuple[Tensor, Tensor, Tensor | None]:
    """Validate a (scores, relevance[, ignore]) triple of equal shape with ``ndim`` dimensions.

    Returns the scores (a tensor; NumPy arrays are converted), relevance as bool and ignore as bool
    (or None). ``ignore`` marks entries to ignore (True = ignored); ``finite`` refuses ±inf scores.

    Examples:
        >>> import numpy as np
        >>> s, r, i = check_scores_relevance(np.array([[0.9, 0.1]]), np.array([[1, 0]]))
        >>> s.dtype, r
        (torch.float64, tensor([[ True, False]]))
    """
    scores = check_float_tensor(scores, "scores", ndim, finite=finite)
    relevance = check_binary(relevance, "relevance", scores.shape).to(scores.device)
    if ignore is not None:
        ignore = check_binary(ignore, "ignore", scores.shape).to(scores.device)
    return scores, relevance, ignore


def check_flags(x: object, name: str, shape: tuple[int, ...] | torch.Size | None = None,
                broadcast_to: tuple[int, ...] | torch.Size | None = None, meaning: str = "True = a real frame") -> Tensor:
    """Return ``x`` as a bool tensor: flags must be bool or hold only 0/1 (a float 0.5 is refused, not read as True).

    ``shape`` demands that exact shape; ``broadcast_to`` only that ``x`` broadcasts to it. The message names the
    argument, the expected form and ``meaning``. Not a tensor (or NumPy array) -> ``TypeError``; otherwise ``ValueError``.

    Examples:
        >>> check_flags(torch.tensor([1.0, 0.0]), "valid", shape=(2,))
        tensor([ True, False])
        >>> check_flags(torch.tensor([0.5, 1.0]), "valid", shape=(2,))
        Traceback (most recent call last):
        ...
        ValueError: valid must be bool flags (True = a real frame) or hold only 0/1, got torch.float32 values such as 0.5
        >>> check_flags(torch.ones(3, dtype=torch.bool), "x_valid", shape=(2, 3))
        Traceback (most recent call last):
        ...
        ValueError: x_valid must be bool flags (True = a real frame) of shape [2, 3], got shape [3]
    """
    x = as_tensor(x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a bool torch.Tensor ({meaning}), got {type(x).__name__}")
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must be bool flags ({meaning}) of shape {list(shape)}, got shape {list(x.shape)}")
    if broadcast_to is not None:
        try:
            torch.broadcast_shapes(tuple(x.shape), tuple(broadcast_to))
            fits = len(x.shape) <= len(broadcast_to) and all(
                a in (1, b) for a, b in zip(reversed(x.shape), reversed(tuple(broadcast_to))))
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(f"{name} must be bool flags ({meaning}) broadcastable to {list(broadcast_to)}, "
                             f"got shape {list(x.shape)}")
    if x.dtype == torch.bool:
        return x
    if x.is_complex() or not ((x == 0) | (x == 1)).all():
        bad = x[~((x == 0) | (x == 1))]
        example = f" such as {bad.flatten()[0].item():g}" if bad.numel() and not x.is_complex() else ""
        raise ValueError(f"{name} must be bool flags ({meaning}) or hold only 0/1, got {x.dtype} values{example}")
    return x.bool()


def check_rate(k: object, name: str) -> float:
    """``k`` as a float if it is a real number in [0, 1] (a fraction of the entries, not a count), else raise.

    Examples:
        >>> check_rate(0.1, "k")
        0.1
        >>> check_rate(3.0, "spatial_k")
        Traceback (most recent call last):
        ...
        ValueError: spatial_k must be a rate in [0, 1] (the fraction of entries averaged; 0 = the maximum), got 3.0
    """
    if isinstance(k, bool) or not isinstance(k, (int, float)) and not (isinstance(k, (Tensor, np.generic))
                                                                       and getattr(k, "ndim", 1) == 0):
        raise TypeError(f"{name} must be a rate in [0, 1] (a float), got {type(k).__name__}")
    value = float(k)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a rate in [0, 1] (the fraction of entries averaged; 0 = the maximum), "
                         f"got {k!r}")
    return value
