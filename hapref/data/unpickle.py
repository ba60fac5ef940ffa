"""Restricted unpickling: read the released annotation pickles without letting a file run code.

A pickle is a small program; ``pickle.load`` executes whatever callables it names, so a crafted file can run
arbitrary code. The released annotation files (FIVR, EVVE, CC_WEB_VIDEO, VCDB) and similarity dictionaries
hold only built-in values (dicts, lists, tuples, strings, numbers) plus sets, which protocol 2/3 pickles
rebuild by calling ``builtins.set`` / ``builtins.frozenset``. Similarity dictionaries written from NumPy hold
NumPy scalars (``numpy.float32(0.7)`` pickles as a call of ``numpy.core.multiarray.scalar`` on a ``numpy.dtype`` and
raw bytes). :func:`load_pickle` resolves exactly those names, rebuilds NumPy scalars of numeric dtypes only, and
refuses every other global with a :class:`ValueError` naming the file.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

#: The only globals a released annotation / similarity pickle may name.
ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    (module, name) for module in ("builtins", "__builtin__") for name in ("set", "frozenset"))  # protocol 2: __builtin__


class _Refused(pickle.UnpicklingError):
    """A global or persistent id the restricted unpickler does not resolve."""


#: NumPy's scalar reconstructor under its module names before and after NumPy 2.
_NUMPY_SCALAR = frozenset(((m, "scalar") for m in ("numpy.core.multiarray", "numpy._core.multiarray")))


def _numpy_dtype(spec: object, align: object = False, copy: object = False):
    """``numpy.dtype`` for numeric and boolean types only (an object dtype could smuggle arbitrary values)."""
    import numpy as np

    dtype = np.dtype(spec) if isinstance(spec, str) else None
    if dtype is None or dtype.kind not in "biuf":
        raise _Refused(f"numpy dtype {spec!r} is not allowed (only bool, integer and float scalars)")
    return dtype


def _numpy_scalar(dtype: object, data: object = None):
    """A NumPy scalar from its dtype and raw bytes, as ``numpy.core.multiarray.scalar`` rebuilds it."""
    import numpy as np

    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf" or not isinstance(data, bytes) \
            or len(data) != dtype.itemsize:
        raise _Refused("a numpy scalar must be a numeric dtype and its raw bytes")
    return np.frombuffer(data, dtype=dtype)[0]


def _latin1_bytes(text: object, encoding: object = "latin1") -> bytes:
    """``_codecs.encode(str, "latin1")``: how protocol 2 stores the raw bytes of a NumPy scalar."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused("_codecs.encode is allowed only on a string with the latin1 codec")
    return text.encode("latin1")


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D102 (pickle API)
        if (module, name) in ALLOWED_GLOBALS:
            return set if name == "set" else frozenset
        if (module, name) in _NUMPY_SCALAR:
            return _numpy_scalar
        if (module, name) == ("numpy", "dtype"):
            return _numpy_dtype
        if (module, name) == ("_codecs", "encode"):
            return _latin1_bytes
        raise _Refused(f"global '{module}.{name}' is not allowed")

    def persistent_load(self, pid):  # noqa: D102 (pickle API)
        raise _Refused("persistent ids are not allowed")


def load_pickle(path: str | os.PathLike) -> object:
    """Load a pickle that may contain only built-in values, ``set`` and ``frozenset``.

    Args:
        path: the file (e.g. ``fivr.pickle``, a released ``*_similarities.pk``).

    Returns:
        The unpickled object (dicts, lists, tuples, sets, strings, numbers, None, bools).

    Raises:
        ValueError: the file names any other global (a crafted pickle trying to run code, or a pickle of
            custom classes), uses persistent ids, or is not a valid pickle; the message names the file.
        FileNotFoundError: ``path`` does not exist.

    Examples:
        >>> import pickle, tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "ok.pickle"
        >>> _ = path.write_bytes(pickle.dumps({"q": {"a", "b"}}, protocol=3))
        >>> sorted(load_pickle(path)["q"])
        ['a', 'b']
        >>> import numpy as np
        >>> _ = path.write_bytes(pickle.dumps({"q": {"a": np.float32(0.5)}}))
        >>> float(load_pickle(path)["q"]["a"])
        0.5
        >>> _ = path.write_bytes(pickle.dumps(pathlib.PurePosixPath("x")))
        >>> load_pickle(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: ...ok.pickle: refused to unpickle: global 'pathlib.PurePosixPath' is not allowed ...
    """
    path = Path(path)
    data = path.read_bytes()
    try:
        return _RestrictedUnpickler(io.BytesIO(data)).load()
    except _Refused as err:
        raise ValueError(f"{path}: refused to unpickle: {err} (only built-in values, set, frozenset and numeric NumPy scalars are "
                         "accepted)") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError, MemoryError) as err:
        raise ValueError(f"{path} is not a valid pickle file ({type(err).__name__}: {err})") from None
