"""Fetch the real benchmarks' annotation and feature files (resumable, checksum-recorded). See README.md.

    python data_scripts/download.py list
    python data_scripts/download.py annotations fivr evve --root ~/data/hapref   # then evaluate with --root
    python data_scripts/download.py features fivr_5k --source dns --root ~/data/hapref
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hapref.data.cache import data_root
from hapref.data.registry import ANNOTATIONS, FEATURES, VIDEO_SOURCES, fetch
from hapref.evaluation.protocols import annotation_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["list", "annotations", "features"])
    parser.add_argument("datasets", nargs="*", help="dataset names (see `list`)")
    parser.add_argument("--source", choices=sorted(FEATURES), default="dns", help="who extracted the features")
    parser.add_argument("--root", type=Path, default=None,
                        help="data folder (annotations: default $HAPREF_ANNOTATIONS, else ~/.cache/hapref; "
                             "features: default $HAPREF_DATA, else ~/.cache/hapref)")
    args = parser.parse_args(argv)
    root = annotation_root(args.root) if args.what == "annotations" else data_root(args.root)

    if args.what == "list":
        print("annotations:", ", ".join(sorted(ANNOTATIONS)))
        for source, files in sorted(FEATURES.items()):
            print(f"features --source {source}:",
                  ", ".join(f"{n} ({f.approx_size})" if f.approx_size else n for n, f in sorted(files.items())))
        print("videos (by hand):")
        for name, where in sorted(VIDEO_SOURCES.items()):
            print(f"  {name}: {where}")
        return 0
    table = ANNOTATIONS if args.what == "annotations" else FEATURES[args.source]
    unknown = sorted(set(args.datasets) - set(table))
    if unknown or not args.datasets:
        parser.error(f"datasets must be some of {sorted(table)}, got {args.datasets}")
    for name in args.datasets:
        files = table[name] if args.what == "annotations" else (table[name],)
        folder = root / ("annotations" if args.what == "annotations" else f"features_{args.source}") / name
        try:
            for path in fetch(files, folder):
                print(f"{name}: {path}")
        except ConnectionError as err:  # network failure, stall or early end: the part is kept
            print(f"error: {name}: {err}\nRun the same command again to resume.", file=sys.stderr)
            return 1
        except (ValueError, OSError) as err:  # checksum/size mismatch, unrelated file, bad archive, disk
            print(f"error: {name}: {err}", file=sys.stderr)
            return 1
    if args.what == "annotations":
        print(f"Every file matched its pinned SHA-256 and size. Evaluate with: python -m hapref.evaluation DATASET "
              f"--similarities FILE --root {root}")
    else:
        print("UNVERIFIED: no official checksums are published for feature files. Each was checked only against "
              "the size the server announced; its SHA-256 is recorded in <file>.sha256.json (\"verified\": false) "
              "and checked on later runs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
