"""One small training loop for every pipeline of the book (HAP-VR, Radial, ...).

A pipeline supplies a :class:`Task` (model, deterministic batches, loss, evaluation); :func:`fit`
does the rest: AdamW, linear warm-up + cosine schedule (the S2VS/HAP-VR schedule, the released HAP-VR code, https://github.com/yafeng19/HAP-VR), AMP on CUDA, periodic evaluation, atomic checkpoints and exact resume.
"""

from __future__ import annotations

import io
import json
import math
import random
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from hapref import distributed as hd
from hapref.files import CorruptFileError, atomic_write_bytes, load_verified
from hapref.train import constructors
from hapref.train.distributed_step import gather_objects, mean_terms
from hapref.utils import at_least_float32, get_device, seed_everything

CHECKPOINT = "checkpoint.pt"
CONFIG = "config.json"
METRICS = "metrics.json"
LOG = "log.jsonl"
RUN_FORMAT = 1
#: How long a rank waits in a collective (rank 0 evaluates alone while the others wait).
COLLECTIVE_TIMEOUT_S = 3600.0


#: The autocast dtypes :class:`TrainConfig` accepts: float16 runs with a GradScaler, bfloat16 (float32's
#: exponent range) without one.
AMP_DTYPES: tuple[str, ...] = ("float16", "bfloat16")
#: The device types on which ``TrainConfig.amp`` turns autocast on. CPU autocast is slower than float32 on
#: most CPUs, so only CUDA by default; the tests add ``"cpu"`` to run the AMP path without a GPU.
AMP_DEVICE_TYPES: tuple[str, ...] = ("cuda",)


@dataclass
class TrainConfig:
    """Optimisation settings of one run (HAP-VR §4.1: AdamW + warm-up + cosine annealing).

    ``amp`` turns on mixed precision on CUDA: the model's forward and the loss run under ``torch.autocast`` in
    ``amp_dtype`` (``"float16"`` with a GradScaler, ``"bfloat16"`` without one); every loss of the package
    computes in float32 inside it (:func:`hapref.utils.float32_compute`).

    ``checkpoint_every`` steps (``None``: a tenth of the run) and at least every ``checkpoint_minutes`` a
    checkpoint is written when :func:`fit` has an output folder, so a killed run resumes where it stopped.

    Examples:
        >>> TrainConfig(steps=100).checkpoint_interval()
        10
        >>> TrainConfig(steps=10, grad_clip=-1.0)
        Traceback (most recent call last):
        ...
        ValueError: grad_clip must be a positive number or None (no clipping), got -1.0
    """

    steps: int
    lr: float = 1e-4
    weight_decay: float = 1e-2
    warmup_steps: int = 0
    eval_every: int = 0
    seed: int = 0
    amp: bool = True
    amp_dtype: str = "float16"
    grad_clip: float | None = None
    device: str | None = None
    checkpoint_every: int | None = None
    checkpoint_minutes: float = 5.0

    def __post_init__(self) -> None:
        def whole(name: str, low: int) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")

        def number(name: str) -> float:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            return float(value)

        whole("steps", 1)
        whole("seed", 0)
        whole("eval_every", 0)
        whole("warmup_steps", 0)
        if self.warmup_steps > self.steps:
            raise ValueError(f"warmup_steps must lie in [0, steps={self.steps}], got {self.warmup_steps}")
        if number("lr") <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if number("weight_decay") < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.grad_clip is not None and (isinstance(self.grad_clip, bool) or number("grad_clip") <= 0):
            raise ValueError(f"grad_clip must be a positive number or None (no clipping), got {self.grad_clip}")
        if not isinstance(self.amp, bool):
            raise ValueError(f"amp must be a bool, got {self.amp!r}")
        if self.amp_dtype not in AMP_DTYPES:
            raise ValueError(f"amp_dtype must be one of {', '.join(AMP_DTYPES)}, got {self.amp_dtype!r}")
        if self.device is not None and not isinstance(self.device, str):
            raise ValueError(f"device must be a string such as 'cpu' or 'cuda:0', or None, got {self.device!r}")
        if self.checkpoint_every is not None:
            whole("checkpoint_every", 1)
        if number("checkpoint_minutes") <= 0:
            raise ValueError(f"checkpoint_minutes must be > 0, got {self.checkpoint_minutes}")

    def checkpoint_interval(self) -> int:
        """Steps between periodic checkpoints (``checkpoint_every``, or a tenth of the run, at least 1).

        Examples:
            >>> TrainConfig(steps=250).checkpoint_interval(), TrainConfig(steps=5).checkpoint_interval()
            (25, 1)
            >>> TrainConfig(steps=250, checkpoint_every=7).checkpoint_interval()
            7
        """
        return self.checkpoint_every or max(1, self.steps // 10)


@runtime_checkable
class Task(Protocol):
    """What a pipeline plugs into :func:`fit`.

    Optional hooks, used when present: ``run_settings() -> dict`` (every resolved setting, recorded in
    ``config.json``), ``model_spec() -> {"factory": "hapref.<module>:<name>", "kwargs": {...}, "preprocess":
    {name: "hapref.<module>:<Class>"}}`` (what :func:`load_run` rebuilds), ``preprocess() -> {name: module}``
    (saved with the checkpoint; each module is rebuilt as ``Class(**state_dict)``), and
    ``state_dict()`` / ``load_state_dict(state)`` for state the task itself changes while training.

    Examples:
        >>> class Toy:  # a least-squares toy task
        ...     def build_model(self):
        ...         return torch.nn.Linear(4, 1)
        ...     def batch(self, step, device):
        ...         return torch.randn(8, 4, generator=torch.Generator().manual_seed(step)).to(device)
        ...     def loss(self, model, batch):
        ...         return {"loss": (model(batch)[:, 0] - batch.sum(1)).pow(2).mean()}
        ...     def evaluate(self, model):
        ...         return {"mse": float(self.loss(model, self.batch(-1, "cpu"))["loss"])}
        >>> isinstance(Toy(), Task), isinstance(object(), Task)
        (True, False)
    """

    def build_model(self) -> nn.Module:
        """A freshly initialised model (called after seeding)."""

    def batch(self, step: int, device: torch.device) -> Any:
        """The training batch of ``step``, a pure function of (task seed, step) so resume is exact."""

    def loss(self, model: nn.Module, batch: Any) -> dict[str, Tensor]:
        """Loss terms; key ``"loss"`` is optimised, the others are only logged."""

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Evaluation metrics of ``model`` (called in eval mode without gradients)."""


@dataclass
class TrainResult:
    """The trained model, one history entry per step (eval metrics merged in) and the final metrics.

    Examples:
        >>> result = TrainResult(torch.nn.Linear(2, 2), [{"step": 1, "loss": 0.5}], {"mAP": 0.9})
        >>> result.metrics
        {'mAP': 0.9}
    """

    model: nn.Module
    history: list[dict[str, float]] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)


def lr_factor(step: int, config: TrainConfig, start: float = 0.01, final: float = 0.1) -> float:
    """Learning-rate multiplier after ``step`` updates: linear warm-up from ``start``·lr, then cosine to ``final``·lr.

    The released HAP-VR schedule (the released HAP-VR code, https://github.com/yafeng19/HAP-VR).

    Examples:
        >>> config = TrainConfig(steps=100, warmup_steps=10)
        >>> [round(lr_factor(s, config), 3) for s in (0, 10, 100)]
        [0.01, 1.0, 0.1]
    """
    if step < config.warmup_steps:
        return start + (1.0 - start) * step / config.warmup_steps
    span = max(config.steps - config.warmup_steps, 1)
    progress = min((step - config.warmup_steps) / span, 1.0)
    return final + (1.0 - final) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _rng_state() -> dict[str, Any]:
    """All RNG states as tensors and lists (loadable with ``weights_only=True``)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "python": [list(x) if isinstance(x, tuple) else x for x in random.getstate()],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))


def _save_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=2, sort_keys=True).encode())


def _save_state(state: dict[str, Any], path: Path) -> None:
    """Serialise in memory, then write through a temporary file that is fsynced and renamed (atomic)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def _remove_partial_saves(out: Path) -> list[str]:
    """Delete the temporary files/folders an interrupted atomic save left in ``out`` (``.<name>.*.tmp``)."""
    removed = []
    for leftover in out.glob(".*.tmp"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
        removed.append(leftover.name)
    return removed


def read_json(path: str | Path) -> dict[str, Any]:
    """A run's JSON file; a ValueError naming the path when it is missing, truncated or not an object.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = (Path(d) / "config.json").write_text("{broken")
        ...     read_json(Path(d) / "config.json")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: .../config.json is not a readable run file (JSONDecodeError); delete it or train with --force
    """
    path = Path(path)
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a readable run file ({type(err).__name__}); delete it or train with "
                         f"--force") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(value).__name__}")
    return value


def load_checkpoint(out_dir: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The plain state-dict checkpoint that :func:`fit` wrote to ``out_dir`` (loaded with ``weights_only=True``).

    A missing or damaged file raises a ValueError that names it.

    Examples:
        >>> import tempfile
        >>> class Toy:  # a least-squares toy task
        ...     def build_model(self):
        ...         return torch.nn.Linear(4, 1)
        ...     def batch(self, step, device):
        ...         return torch.randn(8, 4, generator=torch.Generator().manual_seed(step)).to(device)
        ...     def loss(self, model, batch):
        ...         return {"loss": (model(batch)[:, 0] - batch.sum(1)).pow(2).mean()}
        ...     def evaluate(self, model):
        ...         return {"mse": float(self.loss(model, self.batch(-1, "cpu"))["loss"])}
        >>> out = tempfile.mkdtemp()
        >>> _ = fit(Toy(), TrainConfig(steps=2, lr=1e-2), out, progress=False)
        >>> state = load_checkpoint(out)
        >>> state["step"], sorted(state["model"])
        (2, ['bias', 'weight'])
        >>> load_checkpoint(tempfile.mkdtemp())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: no checkpoint at .../checkpoint.pt
    """
    path = Path(out_dir) / CHECKPOINT
    if not path.is_file():
        raise ValueError(f"no checkpoint at {path}")
    try:
        return load_verified(path, map_location=map_location, expect=dict)  # CRC-checked before unpickling
    except CorruptFileError as err:  # a flipped bit, truncated zip, foreign pickle: refused, left in place
        raise ValueError(f"{err}: not resuming from or loading a corrupt checkpoint; delete it and train again "
                         f"(--force), or restore it from a copy") from None


def _evaluate(task: Task, model: nn.Module) -> dict[str, float]:
    model.eval()
    with torch.no_grad():
        metrics = {k: float(v) for k, v in task.evaluate(model).items()}
    model.train()
    return metrics


def _differences(saved: Any, new: Any, prefix: str = "") -> list[str]:
    """Human-readable ``key: saved -> new`` lines of two JSON-like values."""
    if isinstance(saved, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(saved) | set(new), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            if key not in saved or key not in new:
                out.append(f"{name}: {saved.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}")
            else:
                out += _differences(saved[key], new[key], name)
        return out
    return [] if saved == new else [f"{prefix}: {saved!r} -> {new!r}"]


def run_record(task: Task, config: TrainConfig, run: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``config.json`` of a run: ``run`` (pipeline, profile, loss, seed), world size, version, every setting.

    ``settings`` and ``model`` come from the task's optional ``run_settings()`` and ``model_spec()`` hooks.

    Examples:
        >>> class Toy:  # a least-squares toy task
        ...     def build_model(self):
        ...         return torch.nn.Linear(4, 1)
        ...     def batch(self, step, device):
        ...         return torch.randn(8, 4, generator=torch.Generator().manual_seed(step)).to(device)
        ...     def loss(self, model, batch):
        ...         return {"loss": (model(batch)[:, 0] - batch.sum(1)).pow(2).mean()}
        ...     def evaluate(self, model):
        ...         return {"mse": float(self.loss(model, self.batch(-1, "cpu"))["loss"])}
        >>> record = run_record(Toy(), TrainConfig(steps=3), {"pipeline": "toy"})
        >>> record["pipeline"], record["train"]["steps"], "model" in record
        ('toy', 3, False)
    """
    from hapref import __version__
    from hapref.distributed import get_world_size

    record: dict[str, Any] = dict(run or {})
    record.update({"format": RUN_FORMAT, "hapref_version": __version__, "world_size": get_world_size(),
                   "train": asdict(config)})
    if hasattr(task, "run_settings"):
        record["settings"] = task.run_settings()
    if hasattr(task, "model_spec"):
        record["model"] = task.model_spec()
    return json.loads(json.dumps(record))  # tuples -> lists, exactly what the file will hold


#: Settings that say where and how often a run is saved, not what it computes: a resume may change them.
NOT_IDENTITY = ("device", "checkpoint_every", "checkpoint_minutes")


def check_resumable(saved: dict[str, Any], new: dict[str, Any], path: Path) -> None:
    """Refuse to continue a run whose identity differs: everything but the world size, the version and the
    :data:`NOT_IDENTITY` training settings (device, checkpoint frequency).

    Examples:
        >>> run = {"pipeline": "tca", "loss": "circle", "train": {"steps": 10, "device": "cpu"}}
        >>> check_resumable(run, {**run, "train": {"steps": 10, "device": "cuda"}}, Path("runs/a/config.json"))
        >>> check_resumable(run, {**run, "loss": "infonce"}, Path("runs/a/config.json"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: cannot resume the run in runs/a: ... settings (loss: 'circle' -> 'infonce'); use another --out, ...
    """
    def identity(record: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in record.items() if k not in ("world_size", "hapref_version")}
        if isinstance(out.get("train"), dict):
            out["train"] = {"amp_dtype": "float16",          # runs recorded before the setting existed
                            **{k: v for k, v in out["train"].items() if k not in NOT_IDENTITY}}
        return out

    diffs = _differences(identity(saved), identity(new))
    if diffs:
        raise ValueError(f"cannot resume the run in {path.parent}: it was started with other settings "
                         f"({'; '.join(diffs)}); use another --out, or --force to start it again")


class ScalarLog:
    """TensorBoard scalars of a run (``torch.utils.tensorboard``): each numeric field of a history entry at its step.

    ``history`` (entries already logged, e.g. before a resume) is written first. Where the ``tensorboard`` package is
    missing it warns once and writes nothing (``writer`` is None).

    Examples:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> log = ScalarLog(folder, [{"step": 1, "loss": 0.9, "lr": 1e-3}])
        >>> log.write({"step": 2, "loss": 0.7, "lr": 1e-3, "mAP": 0.5})
        >>> log.close()
        >>> log.writer is None or any(name.startswith("events.out.tfevents") for name in os.listdir(folder))
        True
    """

    def __init__(self, folder: str | Path, history: list[dict[str, float]] = ()) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except (ImportError, ModuleNotFoundError):
            warnings.warn("tensorboard is not installed: no TensorBoard scalars are written (pip install "
                          "tensorboard)", stacklevel=3)
            self.writer = None
            return
        self.writer = SummaryWriter(log_dir=str(folder))
        for entry in history:
            self.write(entry)

    def write(self, entry: dict[str, float]) -> None:
        """Every numeric field of ``entry`` but ``step``, as the scalar of that name at ``entry["step"]``.

        Examples:
            >>> import tempfile
            >>> log = ScalarLog(tempfile.mkdtemp())
            >>> log.write({"step": 3, "loss": 0.5, "note": "not a number: skipped"})
            >>> log.close()
        """
        if self.writer is None:
            return
        for key, value in entry.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(key, value, int(entry["step"]))
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file (nothing to do where tensorboard is missing).

        Examples:
            >>> import tempfile
            >>> ScalarLog(tempfile.mkdtemp()).close()
        """
        if self.writer is not None:
            self.writer.close()


def fit(task: Task, config: TrainConfig, out_dir: str | Path | None = None, resume: bool = False,
        progress: bool = True, run: dict[str, Any] | None = None, force: bool = False,
        announce: bool = False, tensorboard: bool = False,
        on_evaluate: Callable[[list[dict[str, float]], dict[str, float]], object] | None = None) -> TrainResult:
    """Train ``task`` for ``config.steps`` AdamW steps; evaluate every ``eval_every`` steps and at the end.

    With ``out_dir``: ``config.json`` (:func:`hapref.train.loop.run_record`), a checkpoint (model, optimiser,
    scheduler, AMP scaler, RNG states, step, history, the task's own state and its ``preprocess()`` modules) written
    atomically every :meth:`TrainConfig.checkpoint_interval` steps, at least every ``checkpoint_minutes``, at
    every evaluation and at the end; ``log.jsonl`` (one line per step and evaluation) and ``metrics.json``.
    With ``resume`` the run continues from the checkpoint and reaches the same weights, bit for bit, as an
    uninterrupted run; a run folder that already holds a checkpoint is only restarted with ``force``.

    Under ``torchrun`` (several processes, :func:`hapref.distributed.init_distributed`: gloo on the CPU,
    NCCL with each rank on GPU ``LOCAL_RANK``) every rank builds the same initial model, then draws from
    its own random stream; the task's batches are the rank's shard (``hapref.train.distributed_step``)
    and the gradients are averaged over ranks before each step. Rank 0 alone writes the run folder, logs
    the loss terms averaged over ranks, evaluates and returns metrics (the others return ``{}``). The
    checkpoint keeps every rank's RNG state, so a resume at the same world size is bit for bit; a resume
    at another world size continues the model, optimiser and schedule exactly and says that the batches
    and random streams differ from an uninterrupted run.

    ``announce`` (the command line's choice) prints, from rank 0, the step a resumed run continues from and one
    line per evaluation (``step N/S: metric=value ...``), with or without the progress bar. ``tensorboard`` (also
    the command line's) writes every logged scalar (loss terms, learning rate, evaluated metrics) to
    ``<out_dir>/tensorboard`` for ``tensorboard --logdir``, where the ``tensorboard`` package is installed (a warning
    says so where it is not). ``on_evaluate(history, metrics)`` is called on rank 0 after each evaluation (the
    command line writes ``curves.png`` there).

    Examples:
        >>> import os, tempfile
        >>> class Toy:  # a least-squares toy task
        ...     def build_model(self):
        ...         return torch.nn.Linear(4, 1)
        ...     def batch(self, step, device):
        ...         return torch.randn(8, 4, generator=torch.Generator().manual_seed(step)).to(device)
        ...     def loss(self, model, batch):
        ...         return {"loss": (model(batch)[:, 0] - batch.sum(1)).pow(2).mean()}
        ...     def evaluate(self, model):
        ...         return {"mse": float(self.loss(model, self.batch(-1, "cpu"))["loss"])}
        >>> out = tempfile.mkdtemp()
        >>> result = fit(Toy(), TrainConfig(steps=3, lr=1e-2), out, progress=False)
        >>> [entry["step"] for entry in result.history], sorted(result.metrics)
        ([1, 2, 3], ['mse'])
        >>> sorted(os.listdir(out))
        ['checkpoint.pt', 'config.json', 'log.jsonl', 'metrics.json']
    """
    if not isinstance(task, Task):
        raise ValueError(f"task must implement build_model/batch/loss/evaluate, got {type(task).__name__}")
    if resume and out_dir is None:
        raise ValueError("resume=True needs out_dir (the folder holding the checkpoint)")
    if resume and force:
        raise ValueError("resume and force exclude each other: resume continues the run, force starts it again")
    device = get_device(config.device)
    if hd.init_distributed("nccl" if device.type == "cuda" else "gloo", timeout_s=COLLECTIVE_TIMEOUT_S):
        device = hd.rank_device()
    main, world = hd.is_main_process(), hd.get_world_size()
    use_amp = config.amp and device.type in AMP_DEVICE_TYPES
    amp_dtype = getattr(torch, config.amp_dtype)
    seed_everything(config.seed)
    model = task.build_model().to(device)
    if world > 1:                       # the same initial weights on every rank, then a random stream of its own
        seed_everything(hd.rank_seed(config.seed))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the task's model has no trainable parameters")
    # a task may give parameter groups their own learning rates (e.g. Radial's fc multiplier over a pretrained CNN)
    groups = task.param_groups(model, config.lr) if hasattr(task, "param_groups") else params
    optimizer = torch.optim.AdamW(groups, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, config))
    scaler = torch.amp.GradScaler(device.type, enabled=use_amp and amp_dtype == torch.float16)
    history: list[dict[str, float]] = []
    start = 0

    out = Path(out_dir) if out_dir is not None else None
    log = None
    if out is not None:
        if main:
            out.mkdir(parents=True, exist_ok=True)
            _remove_partial_saves(out)
        record = run_record(task, config, run)
        saved_config = out / CONFIG
        has_run = (out / CHECKPOINT).exists() or (out / METRICS).exists()
        if hd.broadcast_object(resume and (out / CHECKPOINT).exists()):      # rank 0's view, before it writes
            if main:
                check_resumable(read_json(saved_config), record, saved_config)
            state = load_checkpoint(out, map_location=device)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            scaler.load_state_dict(state["scaler"])
            if state.get("task") is not None and hasattr(task, "load_state_dict"):
                task.load_state_dict(state["task"])
            history, start = list(state["history"]), int(state["step"])
            if announce and main:
                print(f"resuming {out} at step {start} of {config.steps}", flush=True)
            saved_world = int(state.get("world_size", 1))
            if saved_world == world:
                _set_rng_state(state["rng_ranks"][hd.get_rank()] if world > 1 else state["rng"])
            else:
                seed_everything(hd.rank_seed(config.seed + start))
                if main:
                    warnings.warn(f"resuming the run in {out} (world size {saved_world}) with {world} process(es): "
                                  "the model, optimiser and schedule continue exactly; the batches and random "
                                  "streams differ from an uninterrupted run", stacklevel=2)
        elif main:
            if has_run and not force:
                raise ValueError(f"{out} already holds a run ({'finished' if (out / METRICS).exists() else 'started'}"
                                 f"); pass --resume to continue it or --force to overwrite it")
            if resume:
                warnings.warn(f"no checkpoint in {out}: the run starts from step 0", stacklevel=2)
            for name in (CHECKPOINT, METRICS, LOG):
                (out / name).unlink(missing_ok=True)
            _save_json(saved_config, record)
        if main:
            log = (out / LOG).open("w")
            for entry in history:
                log.write(json.dumps(entry) + "\n")
            log.flush()
        hd.barrier()

    def checkpoint(step: int) -> None:
        if out is None:
            return
        rngs = gather_objects(_rng_state()) if world > 1 else None    # every rank's, for an exact resume
        if not main:
            return
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                 "rng": _rng_state(), "rng_ranks": rngs or [], "world_size": world, "step": step,
                 "history": history,
                 "task": task.state_dict() if hasattr(task, "state_dict") else None,
                 "preprocess": {k: v.state_dict() for k, v in task.preprocess().items()}
                 if hasattr(task, "preprocess") else {}}
        _save_state(state, out / CHECKPOINT)

    board = ScalarLog(out / "tensorboard", history) if tensorboard and out is not None and main else None
    metrics: dict[str, float] = {}
    interval, last_save = config.checkpoint_interval(), time.monotonic()
    bar = tqdm(range(start, config.steps), initial=start, total=config.steps, disable=not progress or not main,
               desc="train", dynamic_ncols=True)
    try:
        for step in bar:
            batch = task.batch(step, device)
            with torch.autocast(device_type=device.type, dtype=amp_dtype, enabled=use_amp):
                terms = task.loss(model, batch)
            if "loss" not in terms:
                raise ValueError(f"task.loss must return a dict with key 'loss', got keys {sorted(terms)}")
            loss = at_least_float32(terms["loss"])
            logged = mean_terms(terms)      # averaged over ranks, so a non-finite loss stops every rank together
            if not math.isfinite(logged["loss"]):
                raise FloatingPointError(f"non-finite loss {logged['loss']} at step {step}")
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            hd.average_gradients(model)              # several ranks: the global batch's gradient
            if config.grad_clip is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            entry = {"step": step + 1, "lr": optimizer.param_groups[0]["lr"]}
            entry.update(logged)
            scheduler.step()
            done = step + 1
            evaluated = done == config.steps or (config.eval_every and done % config.eval_every == 0)
            if evaluated and main:
                metrics = _evaluate(task, model)
                entry.update(metrics)
                if announce:
                    values = " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, (int, float)))
                    bar.write(f"step {done}/{config.steps}: loss={entry['loss']:.4f} {values}")
            history.append(entry)
            if board is not None:
                board.write(entry)
            if evaluated and main and on_evaluate is not None:
                on_evaluate(history, metrics)
            if log is not None:
                log.write(json.dumps(entry) + "\n")
                log.flush()
            save = evaluated or done % interval == 0 or time.monotonic() - last_save > 60 * config.checkpoint_minutes
            if hd.broadcast_object(save):        # rank 0's clock decides for every rank
                checkpoint(done)
                last_save = time.monotonic()
            bar.set_postfix(loss=f"{entry['loss']:.4f}", refresh=False)
    finally:
        bar.close()
        if log is not None:
            log.close()
        if board is not None:
            board.close()
    if not metrics and main:  # resumed from the final checkpoint: nothing left to train
        metrics = _evaluate(task, model)
    if out is not None and main:
        _save_json(out / METRICS, metrics)
    hd.barrier()
    return TrainResult(model=model, history=history, metrics=metrics)


def load_run(path: str | Path, map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict[str, Any]]:
    """The trained model of a run folder, in eval mode, and its ``config.json`` (one call; no training data needed).

    The model is rebuilt from the recorded constructor (``config["model"]``: factory and keyword arguments)
    and loaded from ``checkpoint.pt`` with ``weights_only=True``. ``config.json`` is treated as data: the
    factory must be one of ``hapref.train.constructors.MODEL_CONSTRUCTORS`` and each argument must fit
    its signature, else a ValueError names the field (nothing is called). ``config["preprocess"]`` holds the modules
    to apply to new inputs before the model, rebuilt from the checkpoint (e.g. ``"whitening"``, the
    :class:`~hapref.features.PCAWhitening` the model was trained behind).

    Examples:
        >>> import tempfile
        >>> from hapref.train.tca import build_model
        >>> class Toy:  # a task whose model_spec() names a hapref constructor
        ...     spec = {"factory": "hapref.train.tca:build_model",
        ...             "kwargs": {"dim": 8, "nhead": 2, "dim_feedforward": 16, "dropout": 0.0, "bank_size": 0}}
        ...     def build_model(self):
        ...         return build_model(**self.spec["kwargs"])
        ...     def model_spec(self):
        ...         return self.spec
        ...     def batch(self, step, device):
        ...         return torch.randn(4, 5, 8, generator=torch.Generator().manual_seed(step)).to(device)
        ...     def loss(self, model, batch):
        ...         return {"loss": model(batch).sum(-1).pow(2).mean()}
        ...     def evaluate(self, model):
        ...         return {}
        >>> out = tempfile.mkdtemp()
        >>> _ = fit(Toy(), TrainConfig(steps=2, lr=1e-2), out, progress=False)
        >>> model, config = load_run(out)
        >>> type(model).__name__, model.training, config["model"]["factory"], config["preprocess"]
        ('AggregatorWithBank', False, 'hapref.train.tca:build_model', {})
        >>> model(torch.randn(1, 5, 8)).shape
        torch.Size([1, 8])
    """
    folder = Path(path)
    config = read_json(folder / CONFIG)
    spec = config.get("model")
    if not isinstance(spec, dict) or "factory" not in spec:
        raise ValueError(f"{folder / CONFIG} records no model constructor (written by an older hapref or by "
                         f"fit() on a task without model_spec())")
    # config.json is data: only allow-listed hapref constructors, arguments checked before any call
    factory = constructors.resolve(spec["factory"], constructors.MODEL_CONSTRUCTORS,
                                   f"{folder / CONFIG}: model.factory")
    model = constructors.checked_call(factory, spec.get("kwargs", {}), f"{folder / CONFIG}: model.kwargs")
    state = load_checkpoint(folder, map_location=map_location)
    model.load_state_dict(state["model"])
    preprocess = {}
    for name, tensors in state.get("preprocess", {}).items():
        factory = (spec.get("preprocess") or {}).get(name)
        if factory is None:
            raise ValueError(f"{folder / CONFIG} lacks the constructor of the checkpoint's {name!r} module")
        field = f"{folder / CONFIG}: model.preprocess.{name}"
        cls = constructors.resolve(factory, constructors.PREPROCESS_CONSTRUCTORS, field)
        preprocess[name] = constructors.checked_call(cls, tensors, field, tensors=True).eval()
    config["preprocess"] = preprocess
    return model.eval(), config
