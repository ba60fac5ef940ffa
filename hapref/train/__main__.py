"""``python -m hapref.train <pipeline> --profile {smoke,quick,full}``: train, evaluate, print the summary line last."""

from __future__ import annotations

import argparse
import sys

from hapref.train.loop import fit
from hapref.train.registry import PIPELINES, load_pipeline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hapref.train", description=__doc__)
    parser.add_argument("pipeline", choices=sorted(PIPELINES))
    parser.add_argument("--profile", default="smoke", help="run size: smoke, quick, full or released")
    parser.add_argument("--loss", default=None, help="loss name (default: the paper's, the pipeline's DEFAULT_LOSS)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="folder for checkpoint.pt, config.json, metrics.json")
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args(argv)
    try:
        pipeline = load_pipeline(args.pipeline)
    except ValueError as err:
        parser.error(str(err))
    if args.profile not in pipeline.PROFILES:
        parser.error(f"--profile must be one of {', '.join(pipeline.PROFILES)}; got {args.profile!r}")
    loss = args.loss or pipeline.DEFAULT_LOSS
    if loss not in pipeline.LOSSES:
        parser.error(f"--loss must be one of {', '.join(pipeline.LOSSES)}; got {loss!r}")
    if args.resume and args.out is None:
        parser.error("--resume needs --out")
    task, config = pipeline.build(args.profile, loss, args.seed, progress=not args.no_progress)
    result = fit(task, config, out_dir=args.out, resume=args.resume, progress=not args.no_progress)
    print(pipeline.summary_line(result.metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
