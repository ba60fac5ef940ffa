"""Evaluate similarities with a benchmark's published protocol.

    python -m hapref.evaluation fivr-5k --similarities fivr-5k_similarities.pk --root ~/data/hapref
    python -m hapref.evaluation evve --similarities sims.json --root ~/data/hapref --out results.json
    python -m hapref.evaluation fivr-5k --features fivr_5k.hdf5 --released s2vs --checkpoint s2vs_dns.pth
    python -m hapref.evaluation svd --features svd.hdf5 --released hapvr --checkpoint model.pth
    python -m hapref.evaluation evve --features evve.hdf5 --checkpoint runs/hapvr-full   # a hapref run folder
    python -m hapref.evaluation evve --features evve.hdf5 --features-only              # Chamfer, no network

``--similarities`` reads the released format ``{query_id: {target_id: score}}``: a pickle (read with the
restricted unpickler: built-in values only, nothing can run) or a JSON file. It is scored against the
protocol's whole database, as the released dataset classes count it by default (``FIVR('5k').evaluate(sims)``):
a database video the file lacks is never retrieved, so a partial file scores what the released evaluator
gives on it, never more. ``--available FILE`` (one id a line) declares a deliberate subset instead (e.g. the
videos you could download). ``--root`` is the folder holding ``annotations/<name>/<file>`` as
``python -m hapref.data.download annotations`` writes it, or that ``annotations`` folder itself (default
``$HAPREF_ANNOTATIONS``, else ``$HAPREF_DATA`` when it holds ``annotations/``, else ``~/.cache/hapref``).
Dataset names are case-insensitive (S2VS's ``FIVR-5K`` works).

``--features`` reads region features from an HDF5 file with one ``[T, R, D]`` dataset per video (the DnS /
S2VS layout; SVD keys may keep ``.mp4``), scores every query against the database with
:func:`hapref.evaluation.similarities` as the released evaluation loop does, and evaluates the result
against the videos the file holds (the ``all_db`` S2VS's ``evaluation.py`` passes).
The network: ``--released s2vs|hapvr --checkpoint FILE`` (a released checkpoint or one written by the
released ``train.py``, :func:`hapref.models.load_released_network`), ``--checkpoint RUN`` (a hapref HAP-VR
training run folder, with the preprocessing it records, e.g. its PCA whitening:
:func:`hapref.train.runs.load_run_scorer`) or ``--features-only`` (two-level Chamfer on the features).

Every evaluation prints its coverage (queries and database videos scored, against the protocol) and warns
on stderr when it is incomplete (``--strict`` refuses it instead: exit status 2); it says whether tied
scores could change a value and which tie policy it used (``--ties expected``, the default: the expected
value over tie orders; ``--ties released``: the released evaluators' order). SVD without ``--unlabeled`` is
the labelled-pairs-only variant, and says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from hapref.data.unpickle import load_pickle
from hapref.extras import missing_dependency
from hapref.evaluation.protocols import DATASETS, TIES, CoverageWarning, Results, evaluate


def _dataset(name: str) -> str:
    """Dataset names in any case (S2VS spells them ``FIVR-5K``, ``CC_WEB_VIDEO``)."""
    return name.lower()


def build_parser() -> argparse.ArgumentParser:
    """The command line: a dataset and one input mode (``--similarities FILE`` or ``--features FILE``).

    Examples:
        >>> build_parser().parse_args(["evve", "--similarities", "s.pk"]).dataset
        'evve'
        >>> build_parser().parse_args(["FIVR-5K", "--similarities", "s.pk"]).dataset
        'fivr-5k'
    """
    from hapref.evaluation.scoring import DEFAULT_MAX_CELLS

    def power(n: int) -> str:
        return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else str(n)

    parser = argparse.ArgumentParser(prog="python -m hapref.evaluation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=_dataset, choices=sorted(DATASETS),
                        help="benchmark whose protocol to apply (any case)")
    parser.add_argument("--similarities", type=Path, metavar="FILE",
                        help="released-format similarities {query: {target: score}} (.pk/.pickle or .json)")
    parser.add_argument("--root", type=Path, default=None,
                        help="annotation root: the folder holding annotations/<name>/, or annotations/ itself "
                             "(default $HAPREF_ANNOTATIONS, else $HAPREF_DATA, else ~/.cache/hapref)")
    parser.add_argument("--available", type=Path, default=None, metavar="FILE",
                        help="a deliberate subset: ids (one a line) of the videos to count (default: the "
                             "protocol's whole database; with --features: the videos in the file)")
    parser.add_argument("--unlabeled", type=Path, default=None,
                        help="SVD only: the unlabeled distractor id list (unlabeled-data-id); without it SVD "
                             "scores the labelled-pairs-only variant")
    parser.add_argument("--ties", choices=TIES, default=TIES[0],
                        help="tie policy: 'expected' (default; the expected value over the orders of tied "
                             "scores, order-independent) or 'released' (the released evaluators' order)")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    parser.add_argument("--strict", action="store_true",
                        help="refuse an incomplete evaluation (exit status 2) instead of warning and scoring it")
    group = parser.add_argument_group("scoring features (instead of --similarities)")
    group.add_argument("--features", type=Path, metavar="FILE.hdf5", help="region features, one dataset per video")
    group.add_argument("--released", choices=("s2vs", "hapvr"), default=None,
                       help="--checkpoint is a released S2VS / HAP-VR checkpoint file (or one their train.py wrote)")
    group.add_argument("--checkpoint", type=Path, default=None,
                       help="released checkpoint file (with --released) or hapref training run folder")
    group.add_argument("--features-only", action="store_true",
                       help="no network: Chamfer over regions then frames (the released features_only mode)")
    group.add_argument("--device", default=None, help="torch device for scoring (default: cuda if available)")
    group.add_argument("--max-cells", type=int, default=None,
                       help="frame pairs scored at once (memory about 400 bytes each; default "
                            f"{power(DEFAULT_MAX_CELLS['cpu'])} on the CPU, {power(DEFAULT_MAX_CELLS['cuda'])} on CUDA)")
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
    """The results under the same names as the JSON keys (FIVR: one row for all videos, one for hard).

    Examples:
        >>> print(format_table("evve", {"EVVE_mAP": 0.5, "EVVE_uAP": 0.25}))
        EVVE    EVVE_mAP EVVE_uAP
                  0.5000   0.2500
        (mAP: mean AP over queries; uAP: μAP, the AP of all (query, video) pairs pooled)
    """
    if dataset.startswith("fivr"):
        keys = ("DSVR", "CSVR", "ISVR", "DSVD", "CSVD", "ISVD")
        lines = [f"{dataset.upper():<12}" + "".join(f"{k:>8}" for k in keys)]
        for label, ext in (("all", ""), ("hard (_h)", "_h")):
            lines.append(f"{label:<12}" + "".join(f"{results[k + ext]:>8.4f}" for k in keys))
        lines.append("(*VR: mAP, retrieval; *VD: μAP, detection; _h: fivr_easy_duplicates.txt removed)")
        return "\n".join(lines)
    width = max(8, *(len(k) + 1 for k in results))
    header = f"{dataset.upper():<8}" + "".join(f"{k:>{width}}" for k in results)
    values = " " * 8 + "".join(f"{v:>{width}.4f}" for v in results.values())
    legend = "(mAP: mean AP over queries; uAP: μAP, the AP of all (query, video) pairs pooled"
    legend += {"cc_web_video": "; _star: all videos, not only annotated ones; _c: excluded near-duplicates "
                               "removed)"}.get(dataset, ")")
    return "\n".join([header, values, legend])


def report(dataset: str, results: Results, basis: str) -> str:
    """What :func:`main` prints: the table, EVVE's events, the coverage, the ties and the policy.

    ``basis`` says what the database was (the whole protocol, a declared subset, the videos of a file).
    """
    lines = [format_table(dataset, results)]
    per_event = getattr(results, "details", {}).get("per_event")
    if per_event:
        lines.append("per event (mAP, as the released EVVE evaluator prints it):")
        lines += [f"  {event:<36} {value:.4f}" for event, value in per_event.items()]
    coverage = getattr(results, "coverage", None)
    if coverage is not None:
        lines.append(f"coverage: {coverage.describe()}; database: {basis}")
    policy, tied = getattr(results, "ties", "expected"), getattr(results, "tied", 0)
    meaning = {"expected": "the expected value over the orders of tied scores",
               "released": "the released evaluators' order"}[policy]
    if tied:
        lines.append(f"ties: {tied} groups of tied scores mix relevant and irrelevant videos; policy "
                     f"'{policy}' ({meaning}; --ties {'released' if policy == 'expected' else 'expected'} "
                     "gives the other)")
    else:
        lines.append(f"ties: none that change a value (policy '{policy}')")
    return "\n".join(lines)


def _read_ids(path: Path | None) -> list[str] | None:
    if path is None:
        return None
    from hapref.data.loaders import read_id_list
    return read_id_list(path)


def run_similarities(args: argparse.Namespace) -> Results:
    """Mode ``--similarities``: read the file and evaluate it with ``args.dataset``'s protocol.

    Examples:
        >>> import json, tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_fixtures
        >>> root = write_fixtures(tempfile.mkdtemp())
        >>> sims = root / "sims.json"
        >>> _ = sims.write_text(json.dumps({"1/1_1_Y": {"1/1_1_Y": 1.0, "1/1_2_G": 0.5}}))
        >>> args = build_parser().parse_args(["cc_web_video", "--similarities", str(sims), "--root", str(root)])
        >>> import warnings
        >>> with warnings.catch_warnings(record=True):   # one query of many: incomplete
        ...     results = run_similarities(args)
        >>> sorted(results), results.coverage.complete
        (['mAP', 'mAP_c', 'mAP_c_star', 'mAP_star'], False)
    """
    similarities = read_similarities(args.similarities)
    return evaluate(args.dataset, similarities, args.root, available=_read_ids(args.available),
                    unlabeled=_read_ids(args.unlabeled), ties=args.ties, strict=args.strict)


def feature_network(args: argparse.Namespace):
    """The similarity network the ``--features`` mode scores with (see the module docstring).

    Examples:
        >>> args = build_parser().parse_args(["evve", "--features", "f.hdf5", "--features-only"])
        >>> net = feature_network(args)
        >>> net.comparator is None, net.spatial_k, net.temporal_k
        (True, 0.0, 0.0)
    """
    return _scorer(args).network


def _scorer(args: argparse.Namespace):
    """The network and the preprocessing of its inputs (a run folder's whitening; none otherwise)."""
    from hapref.similarity import VideoSimilarityNetwork
    from hapref.train.runs import RunScorer, load_run_scorer

    if args.features_only:
        if args.checkpoint is not None or args.released is not None:
            raise ValueError("--features-only takes no --checkpoint or --released")
        return RunScorer(VideoSimilarityNetwork(spatial_k=0.0, temporal_k=0.0, comparator=False, min_len=4), ())
    if args.checkpoint is None:
        raise ValueError("--features needs a network: --released s2vs|hapvr --checkpoint FILE, "
                         "--checkpoint RUN or --features-only")
    if args.released is not None:
        from hapref.models import load_released_network
        return RunScorer(load_released_network(args.checkpoint, args.released), ())
    if not args.checkpoint.is_dir():
        raise ValueError(f"--checkpoint {args.checkpoint} is not a run folder; for a released checkpoint file "
                         "add --released s2vs or --released hapvr")
    return load_run_scorer(args.checkpoint)


class _Prepared:
    """A feature dataset whose frames go through a run's preprocessing (e.g. its PCA whitening) when read."""

    def __init__(self, base, prepare) -> None:
        self.base, self.prepare, self.ids = base, prepare, base.ids

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int) -> dict:
        import torch
        item = dict(self.base[index])
        frames = torch.as_tensor(item["frames"])
        item["frames"] = self.prepare(frames[:, None] if frames.ndim == 2 else frames)
        return item

    def __iter__(self):
        return (self[i] for i in range(len(self)))


def expected_dims(scorer) -> int | None:
    """The feature size ``D`` a scorer's inputs must have: its first preprocessing module's input size (a run's
    PCA whitening), else the network's region attention size; None when any size works (Chamfer only).

    Examples:
        >>> from hapref.similarity import VideoSimilarityNetwork
        >>> from hapref.train.runs import RunScorer
        >>> expected_dims(RunScorer(VideoSimilarityNetwork(dims=8, attention=True), ()))
        8
        >>> expected_dims(RunScorer(VideoSimilarityNetwork(comparator=False), ())) is None
        True
    """
    for _, module in getattr(scorer, "preprocess", ()):
        if hasattr(module, "in_dim"):
            return int(module.in_dim)
    attention = getattr(scorer.network, "attention", None)
    return None if attention is None else int(attention.proj.in_features)


def run_features(args: argparse.Namespace) -> Results:
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

    unlabeled = _read_ids(args.unlabeled)
    queries, database = dataset_ids(args.dataset, args.root, unlabeled=unlabeled)
    scorer = _scorer(args)
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
    expected = expected_dims(scorer)
    if expected is not None:        # hapref.features files record their settings; any file has a D
        from hapref.features.hdf5 import check_feature_file
        what = f"--checkpoint {args.checkpoint}" if args.checkpoint is not None else "the network"
        check_feature_file(args.features, dims=expected, what=what)
    if scorer.preprocess:
        query_set, database_set = _Prepared(query_set, scorer.prepare), _Prepared(database_set, scorer.prepare)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    with torch.inference_mode():
        sims = similarities(scorer.network, query_set, database_set, device=device, progress=not args.no_progress,
                            max_cells=args.max_cells)
    if args.save_similarities is not None:
        args.save_similarities.parent.mkdir(parents=True, exist_ok=True)
        args.save_similarities.write_text(json.dumps(sims) + "\n")
    available = set(query_set.ids) | set(database_set.ids)
    declared = _read_ids(args.available)
    if declared is not None:
        available &= {v.removesuffix(".mp4") for v in declared} | set(declared)
    return evaluate(args.dataset, sims, args.root, available=available, unlabeled=unlabeled, ties=args.ties,
                    strict=args.strict)


def _basis(args: argparse.Namespace) -> str:
    """What the database of this run was, in words, for the printed report."""
    if args.features is not None:
        text = f"the videos in --features {args.features}"
        return text + (f" ∩ --available {args.available}" if args.available is not None else "")
    if args.available is not None:
        return f"the declared subset in --available {args.available}"
    return "the protocol's whole database (a video the file lacks is never retrieved)"


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the chosen mode, print the report (and write ``--out``); returns the exit code.

    Errors (unknown dataset, unreadable or refused file, missing annotations, and with ``--strict`` an incomplete
    evaluation) exit with status 2 and a message; an incomplete evaluation and SVD without ``--unlabeled`` are
    otherwise reported on stderr.

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
    if args.unlabeled is not None and args.dataset != "svd":
        parser.error("--unlabeled applies to svd only")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CoverageWarning)
            results = run_similarities(args) if args.similarities is not None else run_features(args)
    except ModuleNotFoundError as err:
        parser.error(missing_dependency(err))
    except (ValueError, TypeError, FileNotFoundError) as err:
        parser.error(str(err))
    for warning in caught:
        if issubclass(warning.category, CoverageWarning):
            print(f"WARNING: {warning.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if args.dataset == "svd" and args.unlabeled is None:
        print("NOTE: SVD without --unlabeled: this is the labelled-pairs-only variant (the published SVD numbers "
              "add the unlabeled distractors: --unlabeled unlabeled-data-id)", file=sys.stderr)
    print(report(args.dataset, results, _basis(args)))
    if args.dataset == "svd" and args.unlabeled is None:
        print("variant: labelled pairs only (no --unlabeled distractors)")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
