"""``python -m hapref.train <pipeline> [--profile P] [--loss L] [--set key=value ...] --out DIR``.

Trains one pipeline, evaluates it and prints the summary line last. ``python -m hapref.train <pipeline> --help``
lists that pipeline's losses, profiles and settings. The run folder holds ``config.json`` (pipeline, profile,
loss, seed, world size, version and every resolved setting), ``checkpoint.pt`` (written periodically),
``log.jsonl`` and ``metrics.json``; ``--resume`` continues it (saying from which step), ``--force`` starts it
again. Without ``--out`` the run is saved in ``$HAPREF_RUNS/<pipeline>-<profile>-<date>-<time>`` (default
``runs/``, git-ignored); the folder is printed at the start and before the summary line, and every evaluation
prints one line, progress bar or not.

Under ``torchrun --nproc_per_node=N -m hapref.train <pipeline> ...`` the N processes train one run (see
:func:`hapref.train.fit`): rank 0 prepares the data first, writes the run folder and prints the one eval line.
"""

from __future__ import annotations

import argparse
import os
import sys

from hapref import distributed as hd
from hapref.extras import missing_dependency
from hapref.train.loop import COLLECTIVE_TIMEOUT_S, fit
from hapref.train.registry import PIPELINES, load_pipeline
from hapref.train.settings import describe, parse_assignments


def _pipeline_help(name: str) -> str:
    """Losses, profiles and the smoke profile's settings of pipeline ``name``."""
    try:
        pipeline = load_pipeline(name)
    except ValueError as err:
        return str(err)
    profiles = ", ".join(pipeline.PROFILES)
    first = next(iter(pipeline.PROFILES.values()))
    lines = describe(first) + (describe(pipeline.Variant()) if hasattr(pipeline, "Variant") else [])
    settings = "\n  ".join(lines)
    return (f"losses: {', '.join(pipeline.LOSSES)} (default {pipeline.DEFAULT_LOSS})\nprofiles: {profiles}\n"
            f"settings of the first profile (--set key=value; TrainConfig fields such as lr, weight_decay, "
            f"grad_clip, checkpoint_every also work):\n  {settings}")


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="smoke", help="run size (see the profiles above)")
    parser.add_argument("--loss", default=None, help="loss name (default: the paper's method)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting, checked against its type and range (repeatable)")
    parser.add_argument("--steps", type=int, default=None, help="number of training steps (same as --set steps=N)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: CUDA when available)")
    parser.add_argument("--features", default=None, metavar="FILE.hdf5",
                        help="train on pre-extracted frame features (DnS/S2VS layout; hapvr, tca)")
    parser.add_argument("--vcdb", default=None, metavar="vcdb.pickle",
                        help="with --features: supervise TCA with VCDB's copy pairs, its distractors in the bank")
    parser.add_argument("--frames", default=None, metavar="DIR",
                        help="train on decoded frames (<id>.npy or <id>/*.jpg; hapvr, tca) instead of generated clips")
    parser.add_argument("--backbone", default=None, help="frame extractor (see hapref.features.BACKBONES)")
    parser.add_argument("--out", default=None,
                        help="run folder: config.json, checkpoint.pt, log.jsonl, metrics.json (default: "
                             "$HAPREF_RUNS/<pipeline>-<profile>-<time>, $HAPREF_RUNS defaulting to runs/)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out (same settings)")
    parser.add_argument("--force", action="store_true", help="overwrite a run already in --out")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def check_run_arguments(args: argparse.Namespace) -> str | None:
    """What is wrong with the run arguments before anything is built (None when nothing is): an ``--out`` that is
    a file or a folder of something else (a run folder already holding a run is :func:`hapref.train.fit`'s to
    refuse without ``--resume`` / ``--force``), a device torch does not know or does not have, ``--vcdb``
    without ``--features``.

    Examples:
        >>> import tempfile
        >>> args = argparse.Namespace(out=None, resume=False, force=False, device="gpu", vcdb=None, features=None)
        >>> check_run_arguments(args)
        "--device must be cpu, cuda or cuda:N (a torch device), got 'gpu'"
        >>> path = tempfile.NamedTemporaryFile(delete=False).name
        >>> check_run_arguments(argparse.Namespace(**{**vars(args), "device": None, "out": path}))[:32]
        '--out must be a run folder, but '
    """
    import os

    import torch

    if args.device is not None:
        try:
            device = torch.device(args.device)
        except RuntimeError:
            return f"--device must be cpu, cuda or cuda:N (a torch device), got {args.device!r}"
        if device.type == "cuda" and not torch.cuda.is_available():
            return f"--device {args.device}: CUDA is not available on this machine"
        if device.type not in ("cpu", "cuda"):
            return f"--device must be cpu, cuda or cuda:N, got {args.device!r}"
    if getattr(args, "vcdb", None) is not None and getattr(args, "features", None) is None:
        return "--vcdb supervises TCA on pre-extracted features: it needs --features FILE.hdf5"
    if args.out is not None and os.path.exists(args.out):
        if not os.path.isdir(args.out):
            return f"--out must be a run folder, but {args.out} is an existing file"
        entries = set(os.listdir(args.out))
        if entries and not entries & {"config.json", "checkpoint.pt", "log.jsonl", "metrics.json"}:
            return (f"--out {args.out} is a folder holding other files, not a hapref run folder; "
                    f"give a new or empty folder")
    return None


def default_run_folder(pipeline: str, profile: str, root: str | None = None) -> str:
    """A new folder name for a run started without ``--out``: ``<root>/<pipeline>-<profile>-<date>-<time>``.

    ``root`` defaults to ``$HAPREF_RUNS``, else ``runs`` (git-ignored); a name already taken gets ``-2``, ``-3``...

    Examples:
        >>> import tempfile, re
        >>> root = tempfile.mkdtemp()
        >>> bool(re.fullmatch(r".*/hapvr-smoke-\\d{8}-\\d{6}", default_run_folder("hapvr", "smoke", root)))
        True
    """
    import os
    import time

    root = root if root is not None else os.environ.get("HAPREF_RUNS") or "runs"
    base = os.path.join(root, f"{pipeline}-{profile}-{time.strftime('%Y%m%d-%H%M%S')}")
    folder, n = base, 1
    while os.path.exists(folder):
        n += 1
        folder = f"{base}-{n}"
    return folder


def save_curves(out: str, history: list[dict[str, float]], metrics: list[str]) -> str | None:
    """``<out>/curves.png``: the training loss and each of ``metrics`` (evaluated) against the step (None without
    matplotlib, the ``data`` extra, or without history).

    Examples:
        >>> import tempfile, os
        >>> out = tempfile.mkdtemp()
        >>> path = save_curves(out, [{"step": 1, "loss": 0.9}, {"step": 2, "loss": 0.7, "mAP": 0.5}], ["mAP"])
        >>> os.path.basename(path), os.path.getsize(path) > 0
        ('curves.png', True)
    """
    import os

    if not history:
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from hapref.plotting.training import plot_history
    except ModuleNotFoundError:
        return None
    fig, axes = plt.subplots(1, 2 if metrics else 1, figsize=(9 if metrics else 5, 3.2), layout="constrained",
                             squeeze=False)
    plot_history({"train": history}, "loss", ax=axes[0, 0])
    for key in metrics:
        plot_history({key: history}, key, ax=axes[0, 1])
    if metrics:
        axes[0, 1].set_ylabel("evaluation")
    path = os.path.join(out, "curves.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, train, print the summary line; 0 on success, 2 on a usage or settings error."""
    parser = argparse.ArgumentParser(prog="python -m hapref.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="pipeline", required=True, metavar="PIPELINE")
    commands = {}
    for name in sorted(PIPELINES):
        commands[name] = sub.add_parser(name, help=f"train the {name} pipeline", description=_pipeline_help(name),
                                        formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_run_arguments(commands[name])
    args = parser.parse_args(argv)
    command = commands[args.pipeline]
    try:
        pipeline = load_pipeline(args.pipeline)
    except ValueError as err:
        command.error(str(err))
    if args.profile not in pipeline.PROFILES:
        command.error(f"--profile must be one of {', '.join(pipeline.PROFILES)}; got {args.profile!r}")
    loss = args.loss or pipeline.DEFAULT_LOSS
    if loss not in pipeline.LOSSES:
        command.error(f"--loss must be one of {', '.join(pipeline.LOSSES)}; got {loss!r}")
    if (args.resume or args.force) and args.out is None:
        command.error("--resume and --force need --out")
    problem = check_run_arguments(args)
    if problem:
        command.error(problem)
    try:
        overrides = parse_assignments(args.set)
        if "seed" in overrides:
            raise ValueError("the seed is set with --seed, not --set seed=...")
        if args.steps is not None:
            overrides["steps"] = str(args.steps)
        if args.device is not None:
            overrides["device"] = args.device
        for key, setting in (("features", "features"), ("vcdb", "vcdb"), ("frames", "frames_dir")):
            if getattr(args, key) is not None:
                overrides[setting] = getattr(args, key)
        if args.backbone is not None:
            nested = isinstance(pipeline.PROFILES[args.profile], dict)
            overrides["backbone.name" if nested else "backbone"] = args.backbone
        hd.init_distributed("gloo" if args.device == "cpu" else None, timeout_s=COLLECTIVE_TIMEOUT_S)   # torchrun
        out = args.out if args.out is not None else hd.broadcast_object(default_run_folder(args.pipeline,
                                                                                            args.profile))
        if hd.is_main_process():
            print(f"run folder: {out}", flush=True)
        for turn in (True, False):      # rank 0 prepares (and caches) the data first, then the other ranks
            if hd.is_main_process() == turn:
                task, config = pipeline.build(args.profile, loss, args.seed, progress=not args.no_progress,
                                              overrides=overrides)
            hd.barrier()
        run = {"pipeline": args.pipeline, "profile": args.profile, "loss": loss, "seed": args.seed}
        result = fit(task, config, out_dir=out, resume=args.resume, progress=not args.no_progress, run=run,
                     force=args.force, announce=True, tensorboard=True,
                     on_evaluate=lambda history, metrics: save_curves(out, history, list(metrics)))
    except ModuleNotFoundError as err:   # e.g. the generated benchmarks' decoder, from a plain `pip install hapref`
        command.exit(2, f"{command.prog}: error: {missing_dependency(err)}\n")
    except ValueError as err:
        command.error(str(err))
    if hd.is_main_process():            # under torchrun: one eval line, from rank 0
        # each evaluation (the last step's too) drew curves.png already; a run resumed from its final checkpoint
        # trains and evaluates nothing, so it is drawn here then
        drawn = os.path.isfile(os.path.join(out, "curves.png"))
        curves = ", curves.png" if drawn or save_curves(out, result.history, list(result.metrics)) else ""
        board = ", tensorboard/" if os.path.isdir(os.path.join(out, "tensorboard")) else ""
        print(f"run folder: {out} (config.json, checkpoint.pt, log.jsonl, metrics.json{curves}{board})")
        print(pipeline.summary_line(result.metrics))
    hd.destroy_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
