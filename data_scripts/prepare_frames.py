"""Decode a folder of videos into frame arrays for hapref.data.FramesDirectory (one `<id>.npy` per video).

    python data_scripts/prepare_frames.py VIDEO_DIR OUT_DIR --fps 1 --short-side 256

Frames are sampled at `--fps` (first frame, then every round(video fps / fps)-th: 1 fps as in TCA/S2VS),
scaled so the shorter side is `--short-side` and centre-cropped to a square with `--square`. Each file is
written atomically; videos already prepared are skipped, so an interrupted run can simply be restarted.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from hapref.files import atomic_write_bytes
from hapref.data.sources import center_square, decode_video

VIDEO_SUFFIXES = (".mp4", ".webm", ".mkv", ".avi", ".mov", ".flv", ".mpg", ".mpeg")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("videos", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--fps", type=float, default=1.0)
    parser.add_argument("--short-side", type=int, default=256)
    parser.add_argument("--square", action="store_true", help="centre-crop frames to a square")
    args = parser.parse_args(argv)
    files = sorted(p for p in args.videos.rglob("*") if p.suffix.lower() in VIDEO_SUFFIXES)
    if not files:
        parser.error(f"videos: no {VIDEO_SUFFIXES} files under {args.videos}")
    failed = []
    for path in tqdm(files, desc="videos", unit="video"):
        target = args.out / f"{path.stem}.npy"
        if target.exists():
            continue
        try:
            frames = decode_video(path, short_side=args.short_side, fps=args.fps)
        except Exception as err:  # broken downloads are common in these datasets: report and go on
            failed.append(f"{path}: {err}")
            continue
        if args.square:
            frames = center_square(frames).contiguous()
        buffer = io.BytesIO()
        np.save(buffer, frames.numpy(), allow_pickle=False)
        atomic_write_bytes(target, buffer.getvalue())
    for line in failed:
        print("could not decode", line, file=sys.stderr)
    print(f"{len(files) - len(failed)} of {len(files)} videos prepared in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
