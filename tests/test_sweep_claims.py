"""The claims stored with each sweep hold on its stored runs: better - worse > 0 on every seed, mean gap >= margin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_benchmark

from hapref.stats import claim_gaps, claim_holds

ROOT = Path(__file__).resolve().parents[1]


def _runs(sweep: dict, variant: str) -> list[dict]:
    """A variant's runs: "<table>/<row>" in the table layout (HAP-VR, TCA), a loss name in the runs layout."""
    if "configs" in sweep:
        table, row = variant.split("/", 1)
        return sweep["configs"][sweep["tables"][table][row]]["runs"]
    return sweep["runs"][variant]


def _script(name: str):
    return load_benchmark(f"{name}_sweeps")


@pytest.mark.parametrize("name", ["hapvr", "tca", "autossvh", "radial"])
def test_stored_claims_hold_and_match_the_script(name):
    sweep = json.loads((ROOT / "book" / "data" / f"{name}_sweeps.json").read_text())
    assert sweep["claims"] == _script(name).CLAIMS            # the file states what the script declares
    assert sweep["claims"]
    if "configs" not in sweep:                                # the runs layout: paired by (seed, data seed)
        for claim in sweep["claims"]:
            assert claim_holds(sweep, claim), (claim, claim_gaps(sweep, claim))
        return
    for claim in sweep["claims"]:
        better, worse = _runs(sweep, claim["better"]), _runs(sweep, claim["worse"])
        assert [r["seed"] for r in better] == [r["seed"] for r in worse] == sweep["seeds"]
        gaps = [b[claim["metric"]] - w[claim["metric"]] for b, w in zip(better, worse)]
        assert min(gaps) > 0 and sum(gaps) / len(gaps) >= claim["margin"], (claim, gaps)


SCALE = sorted((ROOT / "book" / "data").glob("hapvr_scale_vb*_sweeps.json"))


def test_scale_files_are_stored() -> None:
    assert SCALE, "the HAP-VR scale curve (benchmarks/hapvr_sweeps.py --view-batches) is not stored"


@pytest.mark.parametrize("path", SCALE, ids=[p.stem for p in SCALE])
def test_scale_claims_hold_and_match_the_script(path: Path) -> None:
    """The scale curve's files (one per pool size) state the script's SCALE_CLAIMS, and each holds on every run."""
    sweep = json.loads(path.read_text())
    assert sweep["claims"] == _script("hapvr").SCALE_CLAIMS
    for claim in sweep["claims"]:
        assert claim_holds(sweep, claim), (claim, claim_gaps(sweep, claim))
