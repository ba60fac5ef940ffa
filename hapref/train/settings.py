"""``--set key=value`` overrides of a run's settings, converted and checked against the settings' own types.

A pipeline's settings live in frozen dataclasses (:class:`~hapref.train.TrainConfig`, profiles, variants) or in
plain dicts (nested keys as ``data.size``). A value is parsed with the type of the setting it replaces; a
number whose default is positive must stay positive, one whose default is zero must stay non-negative (sizes,
rates and counts); the dataclasses' own checks then run on the result.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

__all__ = ["apply_overrides", "describe", "named_profile", "override_all", "parse_assignments"]

_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """``["a=1", "b.c=x"]`` -> ``{"a": "1", "b.c": "x"}``; a ValueError for an item without ``=``.

    Examples:
        >>> parse_assignments(["lr=0.001", "data.size=64"])
        {'lr': '0.001', 'data.size': '64'}
    """
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set takes key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _convert(key: str, text: str, current: Any) -> Any:
    """``text`` parsed as the type of ``current`` (the setting's present value)."""
    try:
        if isinstance(current, bool):
            low = text.lower()
            if low not in _TRUE | _FALSE:
                raise ValueError
            return low in _TRUE
        if isinstance(current, int):
            value: Any = int(text)
        elif isinstance(current, float):
            value = float(text)
        elif isinstance(current, str):
            return text
        elif isinstance(current, tuple):
            kind = type(current[0]) if current else float
            return tuple(kind(x) for x in text.split(",") if x.strip())
        elif current is None:
            if text.lower() == "none":
                return None
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return text
        else:
            raise ValueError(f"{key} cannot be set from the command line (a {type(current).__name__})")
    except ValueError as err:
        if "cannot be set" in str(err):
            raise
        raise ValueError(f"{key} must be a {type(current).__name__} like {current!r}, got {text!r}") from None
    if isinstance(current, (int, float)) and (value < 0 or (current > 0 and value <= 0) or value != value):
        raise ValueError(f"{key} must be {'> 0' if current > 0 else '>= 0'}, got {text!r}")
    return value


def _fields(target: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(target):
        return {f.name: getattr(target, f.name) for f in dataclasses.fields(target)}
    return dict(target)


def apply_overrides(target: Any, overrides: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """Apply the ``overrides`` whose key is a setting of ``target``; return the new target and the other overrides.

    ``target`` is a dataclass instance (replaced, so its checks run again) or a dict (copied; ``a.b`` reaches
    nested dicts). ``None``-valued settings accept ``none``, a JSON literal or else a plain string.

    Examples:
        >>> from hapref.train import TrainConfig
        >>> config, rest = apply_overrides(TrainConfig(steps=10), {"lr": "0.01", "batch": "8"})
        >>> config.lr, rest
        (0.01, {'batch': '8'})
        >>> apply_overrides({"data": {"size": 32}}, {"data.size": "64"})[0]
        {'data': {'size': 64}}
        >>> apply_overrides(TrainConfig(steps=10), {"steps": "-3"})
        Traceback (most recent call last):
        ...
        ValueError: steps must be > 0, got '-3'
    """
    fields = _fields(target)
    changes: dict[str, Any] = {}
    rest: dict[str, str] = {}
    for key, text in overrides.items():
        head, _, tail = key.partition(".")
        if head not in fields:
            rest[key] = text
        elif tail:
            if not isinstance(fields[head], dict):
                raise ValueError(f"{head} has no sub-settings; got {key!r}")
            nested, left = apply_overrides(changes.get(head, fields[head]), {tail: text})
            if left:
                raise ValueError(f"unknown setting {key!r}; {head} has {', '.join(sorted(fields[head]))}")
            changes[head] = nested
        else:
            changes[head] = _convert(key, text, fields[head])
    if dataclasses.is_dataclass(target):
        return dataclasses.replace(target, **changes), rest
    return {**target, **changes}, rest


def describe(target: Any, prefix: str = "") -> list[str]:
    """``key=value`` lines of every setting of ``target`` (for ``--help``).

    Examples:
        >>> describe({"steps": 10, "data": {"size": 32}})
        ['data.size=32', 'steps=10']
    """
    lines = []
    for key, value in sorted(_fields(target).items()):
        if isinstance(value, dict):
            lines += describe(value, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}={value}")
    return lines


def override_all(targets: list[Any], overrides: dict[str, str]) -> list[Any]:
    """Apply every override to each of ``targets`` that has the setting; a ValueError for a key none of them has.

    Examples:
        >>> from hapref.train import TrainConfig
        >>> config, profile = override_all([TrainConfig(steps=10), {"steps": 10, "batch": 4}], {"steps": "20"})
        >>> config.steps, profile
        (20, {'steps': 20, 'batch': 4})
        >>> override_all([{"batch": 4}], {"bacth": "8"})
        Traceback (most recent call last):
        ...
        ValueError: unknown setting 'bacth'; known: batch
    """
    out, unknown = [], set(overrides)
    for target in targets:
        new, rest = apply_overrides(target, overrides)
        out.append(new)
        unknown &= set(rest)
    if unknown:
        known = sorted({line.split("=", 1)[0] for t in targets for line in describe(t)})
        raise ValueError(f"unknown setting {sorted(unknown)[0]!r}; known: {', '.join(known)}")
    return out


def named_profile(profile: Any, profiles: dict[str, Any], profile_type: type) -> tuple[str, Any]:
    """``(cache name, settings)`` of a profile name of ``profiles`` or of a ``profile_type`` instance.

    An instance equal to a named profile takes that name; any other (e.g. overridden with ``--set``) is called
    ``<benchmark>-custom``, so its cached data never mixes with a named profile's.

    Examples:
        >>> @dataclasses.dataclass(frozen=True)
        ... class Profile:
        ...     benchmark: str
        ...     steps: int
        >>> profiles = {"smoke": Profile("smoke", 2)}
        >>> named_profile("smoke", profiles, Profile)[0], named_profile(Profile("smoke", 3), profiles, Profile)[0]
        ('smoke', 'smoke-custom')
    """
    if isinstance(profile, profile_type):
        match = [name for name, p in profiles.items() if p == profile]
        return (match[0] if match else f"{profile.benchmark}-custom"), profile
    if profile not in profiles:
        raise ValueError(f"profile must be one of {sorted(profiles)} or a {profile_type.__name__}, got {profile!r}")
    return profile, profiles[profile]
