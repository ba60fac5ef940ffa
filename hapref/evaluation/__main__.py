"""Evaluate similarities with a benchmark's published protocol.

    python -m hapref.evaluation fivr-5k --similarities fivr-5k_similarities.pk --root ~/data/hapref
    python -m hapref.evaluation evve --similarities sims.json --root ~/data/hapref --out results.json

``--similarities`` reads the released format ``{query_id: {target_id: score}}``: a pickle (read with the
restricted unpickler: built-in values only, nothing can run) or a JSON file. ``--root`` holds
``annotations/<name>/<file>`` as ``data_scripts/download.py annotations`` writes it (default
``$HAPREF_ANNOTATIONS``, else ``~/.cache/hapref``).
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
    if args.similarities is None:
        parser.error("give the input: --similarities FILE")
    try:
        results = run_similarities(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        parser.error(str(err))
    print(format_table(args.dataset, results))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
