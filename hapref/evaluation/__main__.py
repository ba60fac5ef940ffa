"""Evaluate similarities with a benchmark's published protocol.

    python -m hapref.evaluation fivr-5k --similarities fivr-5k_similarities.pk --root ~/data/hapref
    python -m hapref.evaluation evve --similarities sims.json --root ~/data/hapref --out results.json
    python -m hapref.evaluation fivr-5k --features fivr_5k.hdf5 --released s2vs --checkpoint s2vs_dns.pth
    python -m hapref.evaluation svd --features svd.hdf5 --released hapvr --checkpoint model.pth
    python -m hapref.evaluation evve --features evve.hdf5 --checkpoint runs/hapvr-full   # a hapref run folder
    python -m hapref.evaluation evve --features evve.hdf5 --features-only              # Chamfer, no network

``--similarities`` reads the released format ``{query_id: {target_id: score}}``: a pickle (read with the
restricted unpickler: built-in values only, nothing can run) or a JSON file. ``--root`` holds
``annotations/<name>/<file>`` as ``data_scripts/download.py annotations`` writes it (default
``$HAPREF_ANNOTATIONS``, else ``~/.cache/hapref``).

``--features`` reads region features from an HDF5 file with one ``[T, R, D]`` dataset per video (the DnS /
S2VS layout; SVD keys may keep ``.mp4``), scores every query against the database with
:func:`hapref.evaluation.similarities` as the released evaluation loop does, and evaluates the result;
videos missing from the file are left out of the available ids, as the released loop leaves them out.
The network: ``--released s2vs|hapvr --checkpoint FILE`` (a released checkpoint,
:func:`hapref.models.load_released_network`), ``--checkpoint RUN`` (a hapref HAP-VR training run folder,
:func:`hapref.train.runs.load_run_network`) or ``--features-only`` (two-level Chamfer on the features).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hapref.data.unpickle import load_pickle
from hapref.evaluation.protocols import DATASETS, evaluate


def build_parser() -> argparse.ArgumentParser:
    """The command line: a dataset and one input mode (``--similarities FILE``).

    Examples:
        >>> build_parser().parse_args(["evve", "--similarities", "s.pk"]).dataset
        'evve'
    """
    parser = argparse.ArgumentParser(prog="python -m hapref.evaluation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", choices=sorted(DATASETS), help="benchmark whose protocol to apply")
    parser.add_argument("--similarities", type=Path, metavar="FILE",
                        help="released-format similarities {query: {target: score}} (.pk/.pickle or .json)")
    parser.add_argument("--root", type=Path, default=None,
                        help="annotation root holding annotations/<name>/ (default $HAPREF_ANNOTATIONS)")
    parser.add_argument("--unlabeled", type=Path, default=None,
                        help="SVD only: the unlabeled distractor id list (unlabeled-data-id)")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    group = parser.add_argument_group("scoring features (instead of --similarities)")
    group.add_argument("--features", type=Path, metavar="FILE.hdf5", help="region features, one dataset per video")
    group.add_argument("--released", choices=("s2vs", "hapvr"), default=None,
                       help="--checkpoint is a released S2VS / HAP-VR checkpoint file")
    group.add_argument("--checkpoint", type=Path, default=None,
                       help="released checkpoint file (with --released) or hapref training run folder")
    group.add_argument("--features-only", action="store_true",
                       help="no network: Chamfer over regions then frames (the released features_only mode)")
    group.add_argument("--device", default=None, help="torch device for scoring (default: cuda if available)")
    group.add_argument("--max-cells", type=int, default=None,
                       help="frame pairs scored at once (memory about 400 bytes each; default 2^16 on the CPU, "
                            "2^21 on CUDA)")
    group.add_argument("--save-similarities", type=Path, default=None,
                       help="also write the computed similarities here as JSON")
    group.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return parser


def read_similarities(path: str | Path) -> dict:
    """Released-format similarities from a pickle (restricted unpickling) or a JSON file.

    Args:
        path: ``.json`` for JSON, anything else is read as a pickle.

    Returns:
        ``{query_id: {target_id: score}}``.

    Raises:
        ValueError: the file is not of that form (named in the message), or the pickle names a global.

    Examples:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "sims.json"
        >>> _ = path.write_text('{"q": {"a": 0.5}}')
        >>> read_similarities(path)
        {'q': {'a': 0.5}}
    """
    path = Path(path)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path} is not a JSON file ({err})") from None
    else:
        data = load_pickle(path)
    if not isinstance(data, dict) or not all(isinstance(row, dict) for row in data.values()):
        raise ValueError(f"{path} must hold {{query_id: {{target_id: score}}}}, got {type(data).__name__}")
    return data


def format_table(dataset: str, results: dict[str, float]) -> str:
    """The results as the papers print them (FIVR: tasks as columns, mAP/μAP and hard rows).

    Examples:
        >>> print(format_table("evve", {"EVVE_mAP": 0.5, "EVVE_uAP": 0.25}))
        EVVE      mAP     μAP
                0.5000  0.2500
    """
    if dataset.startswith("fivr"):
        lines = [f"{dataset.upper():<12}" + "".join(f"{t:>8}" for t in ("DS", "CS", "IS"))]
        for label, kind, ext in (("mAP", "VR", ""), ("μAP", "VD", ""), ("mAP hard", "VR", "_h"),
                                 ("μAP hard", "VD", "_h")):
            lines.append(f"{label:<12}" + "".join(f"{results[t + kind + ext]:>8.4f}" for t in ("DS", "CS", "IS")))
        return "\n".join(lines)
    names = {"EVVE_mAP": "mAP", "EVVE_uAP": "μAP", "uAP": "μAP", "VCDB_mAP": "mAP", "VCDB_uAP": "μAP",
             "mAP_star": "mAP*", "mAP_c": "mAP_c", "mAP_c_star": "mAP_c*"}
    header = f"{dataset.upper():<8}" + "".join(f"{names.get(k, k):>8}" for k in results)
    return header + "\n" + " " * 8 + "".join(f"{v:>8.4f}" for v in results.values())


def run_similarities(args: argparse.Namespace) -> dict[str, float]:
    """Mode ``--similarities``: read the file and evaluate it with ``args.dataset``'s protocol.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_fixtures
        >>> root = write_fixtures(tempfile.mkdtemp())
        >>> sims = root / "sims.json"
        >>> _ = sims.write_text(json.dumps({"1/1_1_Y": {"1/1_1_Y": 1.0, "1/1_2_G": 0.5}}))
        >>> args = build_parser().parse_args(["cc_web_video", "--similarities", str(sims), "--root", str(root)])
        >>> sorted(run_similarities(args))
        ['mAP', 'mAP_c', 'mAP_c_star', 'mAP_star']
    """
    similarities = read_similarities(args.similarities)
    unlabeled = None
    if args.unlabeled is not None:
        from hapref.data.loaders import read_id_list
        unlabeled = read_id_list(args.unlabeled)
    return evaluate(args.dataset, similarities, args.root, unlabeled=unlabeled)


def feature_network(args: argparse.Namespace):
    """The similarity network the ``--features`` mode scores with (see the module docstring).

    Examples:
        >>> args = build_parser().parse_args(["evve", "--features", "f.hdf5", "--features-only"])
        >>> net = feature_network(args)
        >>> net.comparator is None, net.spatial_k, net.temporal_k
        (True, 0.0, 0.0)
    """
    from hapref.similarity import VideoSimilarityNetwork

    if args.features_only:
        if args.checkpoint is not None or args.released is not None:
            raise ValueError("--features-only takes no --checkpoint or --released")
        return VideoSimilarityNetwork(spatial_k=0.0, temporal_k=0.0, comparator=False, min_len=4)
    if args.checkpoint is None:
        raise ValueError("--features needs a network: --released s2vs|hapvr --checkpoint FILE, "
                         "--checkpoint RUN or --features-only")
    if args.released is not None:
        from hapref.models import load_released_network
        return load_released_network(args.checkpoint, args.released)
    if not args.checkpoint.is_dir():
        raise ValueError(f"--checkpoint {args.checkpoint} is not a run folder; for a released checkpoint file "
                         "add --released s2vs or --released hapvr")
    from hapref.train.runs import load_run_network
    return load_run_network(args.checkpoint)


def run_features(args: argparse.Namespace) -> dict[str, float]:
    """Mode ``--features``: score the HDF5 features with the chosen network, then evaluate (released loop).

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_fixtures, write_features
        >>> root = write_fixtures(tempfile.mkdtemp())
        >>> features = write_features(root / "evve.hdf5", "evve", root, dims=8)
        >>> args = build_parser().parse_args(["evve", "--features", str(features), "--features-only",
        ...                                   "--root", str(root), "--no-progress"])
        >>> sorted(run_features(args))
        ['EVVE_mAP', 'EVVE_uAP']
    """
    import h5py
    import torch

    from hapref.data.loaders import HDF5Features
    from hapref.evaluation.protocols import dataset_ids
    from hapref.evaluation.scoring import similarities

    unlabeled = None
    if args.unlabeled is not None:
        from hapref.data.loaders import read_id_list
        unlabeled = read_id_list(args.unlabeled)
    queries, database = dataset_ids(args.dataset, args.root, unlabeled=unlabeled)
    network = feature_network(args)
    if not args.features.is_file():
        raise ValueError(f"--features {args.features} is not a file")
    with h5py.File(args.features, "r") as f:
        keys = set(f.keys())

    def stored(ids: list[str]) -> list[str]:  # SVD files keep the .mp4 suffix
        return [v if v in keys or f"{v}.mp4" not in keys else f"{v}.mp4" for v in ids]

    query_set = HDF5Features(args.features, stored(queries), min_len=1)   # the scorer tiles as released
    database_set = HDF5Features(args.features, stored(database), min_len=1)
    if len(query_set) == 0:
        raise ValueError(f"{args.features} holds none of the {len(queries)} {args.dataset} queries")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    sims = similarities(network, query_set, database_set, device=device, progress=not args.no_progress,
                        max_cells=args.max_cells)
    if args.save_similarities is not None:
        args.save_similarities.parent.mkdir(parents=True, exist_ok=True)
        args.save_similarities.write_text(json.dumps(sims) + "\n")
    available = set(query_set.ids) | set(database_set.ids)
    return evaluate(args.dataset, sims, args.root, available=available, unlabeled=unlabeled)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the chosen mode, print the table (and write ``--out``); returns the exit code.

    Errors (unknown dataset, unreadable or refused file, missing annotations) exit with status 2 and a message.

    Examples:
        >>> main(["evve"])
        Traceback (most recent call last):
        ...
        SystemExit: 2
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.similarities is None) == (args.features is None):
        parser.error("give one input: --similarities FILE or --features FILE.hdf5")
    try:
        results = run_similarities(args) if args.similarities is not None else run_features(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        parser.error(str(err))
    print(format_table(args.dataset, results))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
