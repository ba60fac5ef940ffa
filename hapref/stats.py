"""Summaries of a result over several seeds, and the rule the book uses before it calls one method better.

A chapter states "A beats B" only when the seeds *separate* the two: every seed's value of A is above every
seed's value of B (:func:`separates`). Otherwise the chapter says the two tie on this data. Results are shown as
mean ± sample standard deviation over the seeds (:func:`mean_std`, :func:`format_mean_std`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["mean_std", "format_mean_std", "separates"]


def _values(values: Iterable[float], name: str) -> list[float]:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of numbers, got a string")
    try:
        out = [float(v) for v in values]
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a sequence of numbers (one per seed)") from err
    if not out:
        raise ValueError(f"{name} must hold at least one value (one per seed), got none")
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"{name} must be finite, got {out}")
    return out


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof = 1``; 0 for a single value) of one result over seeds.

    Args:
        values: one finite number per seed (a list, tuple, 1-D tensor or array).

    Returns:
        ``(mean, std)`` as Python floats.

    Examples:
        >>> mean_std([0.5, 0.7, 0.9])
        (0.7, 0.2)
        >>> mean_std([0.3])
        (0.3, 0.0)
    """
    v = _values(values, "values")
    mean = sum(v) / len(v)
    if len(v) == 1:
        return mean, 0.0
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1))
    return round(mean, 12), round(std, 12)


def format_mean_std(values: Iterable[float], digits: int = 3, scale: float = 1.0) -> str:
    """``"mean ± std"`` of one result over seeds, both multiplied by ``scale`` (e.g. 100 for percent).

    Examples:
        >>> format_mean_std([0.5, 0.7, 0.9])
        '0.700 ± 0.200'
        >>> format_mean_std([0.91, 0.93], digits=1, scale=100)
        '92.0 ± 1.4'
    """
    if not isinstance(digits, int) or digits < 0:
        raise ValueError(f"digits must be a non-negative int, got {digits!r}")
    mean, std = mean_std(values)
    return f"{scale * mean:.{digits}f} ± {scale * std:.{digits}f}"


def separates(higher: Sequence[float], lower: Sequence[float]) -> bool:
    """True when every seed's value in ``higher`` exceeds every seed's value in ``lower`` (min > max).

    This is the book's rule for "A is better than B on this data": the seed ranges must not overlap. Two
    methods whose ranges overlap tie here, whatever their means say.

    Examples:
        >>> separates([0.80, 0.82, 0.85], [0.70, 0.75, 0.79])
        True
        >>> separates([0.80, 0.90, 0.95], [0.70, 0.75, 0.85])  # overlapping ranges: a tie
        False
    """
    hi, lo = _values(higher, "higher"), _values(lower, "lower")
    return min(hi) > max(lo)


def claim_gaps(sweep: dict, claim: dict) -> list[float]:
    """The paired gaps ``better − worse`` of one claim of a stored sweep, one per (seed, data seed) run.

    ``sweep`` holds ``"runs": {variant: [{"seed", "data_seed", metric…}]}`` and ``"untrained": {data seed:
    {name: {metric…}}}``; ``claim`` is ``{"better", "worse", "metric", "margin"}`` where either side may be
    ``"untrained:<name>"`` (a training-free method, one value per data seed, paired with every run on that
    instance of the benchmark; ``"untrained:best"``: the best training-free value of that instance in the
    claim's metric, whichever method has it). Runs are paired by ``(seed, data_seed)``; a run missing on one
    side is an error.

    Examples:
        >>> sweep = {"runs": {"a": [{"seed": 0, "data_seed": 0, "mAP": 0.8}, {"seed": 1, "data_seed": 0, "mAP": 0.7}]},
        ...          "untrained": {"0": {"chamfer": {"mAP": 0.6}}}}
        >>> [round(g, 3) for g in claim_gaps(sweep, {"better": "a", "worse": "untrained:chamfer", "metric": "mAP"})]
        [0.2, 0.1]
        >>> sweep["untrained"]["0"]["dtw"] = {"mAP": 0.75}
        >>> [round(g, 3) for g in claim_gaps(sweep, {"better": "a", "worse": "untrained:best", "metric": "mAP"})]
        [0.05, -0.05]
    """
    def untrained(d: int, method: str) -> float:
        methods, metric = sweep["untrained"][str(d)], claim["metric"]
        if method == "best" and "best" not in methods:
            return max(m[metric] for m in methods.values())
        return methods[method][metric]

    def values(name: str) -> dict[tuple[int, int], float]:
        if name.startswith("untrained:"):
            method = name.split(":", 1)[1]
            keys = {(r["seed"], r["data_seed"]) for runs in sweep["runs"].values() for r in runs}
            return {(s, d): untrained(d, method) for s, d in keys}
        if name not in sweep["runs"]:
            raise KeyError(f"claim names variant {name!r}, which the sweep does not hold")
        return {(r["seed"], r["data_seed"]): r[claim["metric"]] for r in sweep["runs"][name]}

    better, worse = values(claim["better"]), values(claim["worse"])
    if claim["better"].startswith("untrained:"):
        better = {k: v for k, v in better.items() if k in worse}
    if claim["worse"].startswith("untrained:"):
        worse = {k: v for k, v in worse.items() if k in better}
    if set(better) != set(worse):
        raise ValueError(f"claim {claim['better']} > {claim['worse']}: runs differ, "
                         f"{sorted(set(better) ^ set(worse))} on one side only")
    return [better[k] - worse[k] for k in sorted(better)]


def claim_holds(sweep: dict, claim: dict) -> bool:
    """A stored claim holds: ``better − worse > 0`` on every (seed, data seed) and the mean gap ≥ ``margin``.

    Examples:
        >>> sweep = {"runs": {"a": [{"seed": 0, "data_seed": 0, "mAP": 0.8}, {"seed": 1, "data_seed": 0, "mAP": 0.7}]},
        ...          "untrained": {"0": {"chamfer": {"mAP": 0.6}}}}
        >>> claim = {"better": "a", "worse": "untrained:chamfer", "metric": "mAP", "margin": 0.05}
        >>> claim_holds(sweep, claim), claim_holds(sweep, {**claim, "margin": 0.2})
        (True, False)
    """
    gaps = claim_gaps(sweep, claim)
    return bool(gaps) and min(gaps) > 0 and sum(gaps) / len(gaps) >= claim.get("margin", 0.0)
