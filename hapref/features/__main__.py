"""Extract region features of videos into the DnS / S2VS HDF5 layout the trainer and the scorer read.

    python -m hapref.features videos/*.mp4 --out features.hdf5                     # EfficientNet-Lite0, 1 fps
    python -m hapref.features --list fivr_5k.txt --out fivr_5k.hdf5 --preset s2vs --whitening pca_resnet50_vcdb_1M.pth
    python -m hapref.features v.mp4 --out f.hdf5 --preset s2vs --weights resnet50-0676ba61.pth --whitening pca.pth
    python -m hapref.features frames/v1/ frames/v2.npy --out f.hdf5 --frame-level   # [T, D] per video

Inputs are video files (decoded with PyAV at ``--fps`` frames per second), ``.npy`` arrays of uint8 frames
``[T, H, W, 3]`` or folders of ``.jpg`` / ``.png`` frames; each is stored under its file or folder name. The
run resumes: videos already in ``--out`` are skipped, and a file written with other settings is refused.
Unreadable videos are listed at the end and skipped (exit status 1 when any failed). ``--preset s2vs`` is the
released S2VS / HAP-VR extractor (ResNet-50 weights and the ViSiL PCA file are local files: nothing is
downloaded; ``--weights FILE`` names the ResNet-50 state dict when it is not in torch's hub cache). Each video
is stored as ``[T, R, D]``: D = 512 with ``--preset s2vs --whitening pca_resnet50_vcdb_1M.pth`` (what the
released S2VS / HAP-VR networks take; 3840 without the whitening), 496 with the default EfficientNet-Lite0.
See :mod:`hapref.features.hdf5`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from hapref.extras import missing_dependency
from hapref.features.backbones import BACKBONES
from hapref.features.hdf5 import (PRESETS, FeatureSettings, build_extractor, read_list, weights_name,
                                  whitening_name, write_features)
from hapref.features.pooling import POOLINGS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hapref.features", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", help="video files, .npy frame arrays or frame folders")
    parser.add_argument("--list", metavar="FILE", help="a file naming one input per line (relative to the file)")
    parser.add_argument("--out", required=True, metavar="FILE.hdf5", help="the features file (created or resumed)")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="named settings (s2vs: the released extractor)")
    parser.add_argument("--backbone", choices=BACKBONES, help="default efficientnet-lite0 (s2vs: resnet50)")
    parser.add_argument("--pooling", choices=POOLINGS, help="default l3imac (s2vs: l3imac_released)")
    parser.add_argument("--whitening", metavar="FILE", help="PCA whitening file (ViSiL .pth or a hapref state)")
    parser.add_argument("--weights", metavar="FILE",
                        help="backbone weights for resnet50 / alexnet: a local torchvision state dict (default: "
                             "torch's hub cache)")
    parser.add_argument("--fps", type=float, help="frames kept per second of video (default 1)")
    parser.add_argument("--resize", type=int, help="shorter side before the centre crop (default 256)")
    parser.add_argument("--crop", type=int, help="centre crop side (default 224)")
    parser.add_argument("--frame-level", action="store_true",
                        help="store [T, D] frame features (the mean of the regions) instead of [T, R, D]")
    parser.add_argument("--batch-size", type=int, default=64, help="frames per backbone batch (default 64)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def settings_from(args: argparse.Namespace) -> FeatureSettings:
    """The :class:`FeatureSettings` of parsed arguments: the preset, then each option given.

    Examples:
        >>> args = build_parser().parse_args(["a.mp4", "--out", "f.hdf5", "--preset", "s2vs", "--fps", "2"])
        >>> s = settings_from(args)
        >>> s.backbone, s.pooling, s.fps, s.crop
        ('resnet50', 'l3imac_released', 2.0, 224)
    """
    values = {"backbone": "efficientnet-lite0", "pooling": "l3imac", **PRESETS.get(args.preset or "", {})}
    for name in ("backbone", "pooling", "fps", "resize", "crop"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    if args.frame_level:
        values["layout"] = "frames"
    values["whitening"] = whitening_name(args.whitening)
    values["weights"] = weights_name(args.weights)
    return FeatureSettings(**values)


def main(argv: Iterable[str] | None = None) -> int:
    args = build_parser().parse_args(None if argv is None else list(argv))
    try:
        inputs = list(args.inputs) + (read_list(args.list) if args.list else [])
        if not inputs:
            raise ValueError("no inputs: give video files / frame folders or --list FILE")
        settings = settings_from(args)
        if args.preset == "s2vs" and args.whitening is None:
            print("note: --preset s2vs without --whitening stores 3840-d ResNet-50 features; the released S2VS / "
                  "HAP-VR networks take the 512-d whitened ones (--whitening pca_resnet50_vcdb_1M.pth)",
                  file=sys.stderr)
        extractor = build_extractor(settings, args.whitening, args.batch_size, weights=args.weights)
        report = write_features(inputs, args.out, extractor, settings, progress=not args.no_progress)
    except ModuleNotFoundError as err:
        print(f"error: {missing_dependency(err)}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(report.written)} written, {len(report.skipped)} already present, "
          f"{len(report.failed)} failed")
    for vid, why in report.failed.items():
        print(f"  failed {vid}: {why}", file=sys.stderr)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
