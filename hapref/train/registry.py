"""Registry of training pipelines: name -> module exposing LOSSES, build() and summary_line().

``build(profile, loss, seed, progress=True) -> (task, TrainConfig)``; ``progress`` shows data-preparation bars.
"""

from __future__ import annotations

import importlib
from types import ModuleType

PIPELINES: dict[str, str] = {"hapvr": "hapref.train.hapvr", "radial": "hapref.train.radial",
                             "tca": "hapref.train.tca", "autossvh": "hapref.train.autossvh"}
PROFILES: tuple[str, ...] = ("smoke", "quick", "full")


def load_pipeline(name: str) -> ModuleType:
    """Import the pipeline module registered as ``name``; a clear ValueError if unknown or not written yet.

    Examples:
        >>> load_pipeline("hapvr").__name__
        'hapref.train.hapvr'
        >>> load_pipeline("nope")
        Traceback (most recent call last):
        ...
        ValueError: unknown pipeline 'nope'; known: autossvh, hapvr, radial, tca
    """
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; known: {', '.join(sorted(PIPELINES))}")
    module_name = PIPELINES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise
        raise ValueError(f"pipeline {name!r} is registered but its module {module_name} does not exist yet") from None
    for attr in ("LOSSES", "DEFAULT_LOSS", "PROFILES", "build", "summary_line"):
        if not hasattr(module, attr):
            raise ValueError(f"pipeline module {module_name} must define {attr}")
    return module
