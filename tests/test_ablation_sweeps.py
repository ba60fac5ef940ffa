"""The TCA and AutoSSVH sweep scripts run every configuration (smoke profile) and the stored files match them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tca_smoke_sweep_runs_every_configuration(tmp_path) -> None:
    sweeps = load_script("tca_sweeps")
    out = tmp_path / "tca.json"
    assert sweeps.main(["--profile", "smoke", "--seeds", "0", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    keys = {key for table in results["tables"].values() for key in table.values()}
    assert keys == set(results["configs"])
    for config in results["configs"].values():
        (run,) = config["runs"]
        assert 0.0 <= run["mAP"] <= 1.0 and 0.0 <= run["uAP"] <= 1.0 and run["curve"]
        assert ("mAP_f" in run) == (config["variant"]["aggregator"] != "netvlad")
    assert set(results["untrained"]) == {"imac", "l3irmac"}


def test_autossvh_smoke_sweep_runs_every_variant(tmp_path) -> None:
    sweeps = load_script("autossvh_sweeps")
    out = tmp_path / "autossvh.json"
    assert sweeps.main(["--profile", "smoke", "--seeds", "0", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert set(results["runs"]) == set(sweeps.LOSSES)
    shared = {loss: runs[0]["shared_frames"] for loss, runs in results["runs"].items()}
    assert shared["random_mask"] == 0.0 and shared["random_independent"] > 0
    for (run,) in results["runs"].values():
        assert 0.0 <= run["mAP@5/autossvh"] <= run["mAP@5"] + 1e-9 <= 1.0 + 1e-9


@pytest.mark.parametrize("name", ["tca_sweeps", "autossvh_sweeps"])
def test_stored_results_match_the_script(name: str) -> None:
    sweeps = load_script(name)
    stored = json.loads((ROOT / "book" / "data" / f"{name}.json").read_text())
    assert len(stored["seeds"]) >= 3
    if name == "tca_sweeps":
        assert stored["tables"] == {table: {row: sweeps.variant_key(v) for row, v in rows.items()}
                                    for table, rows in sweeps.TABLES.items()}
        assert all(len(c["runs"]) == len(stored["seeds"]) for c in stored["configs"].values())
    else:
        assert stored["losses"] == list(sweeps.LOSSES)
        assert all(len(runs) == len(stored["seeds"]) for runs in stored["runs"].values())
