"""The HAP-VR sweep script runs every configuration (smoke profile, 2 steps) and the stored results are consistent."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    return load_benchmark("hapvr_sweeps")


def test_smoke_sweep_runs_every_configuration(tmp_path) -> None:
    sweeps = load_script()
    out = tmp_path / "s.json"
    assert sweeps.main(["--profile", "smoke", "--seeds", "0", "--steps", "2", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    keys = {key for table in results["tables"].values() for key in table.values()}
    assert keys == set(results["configs"])
    for config in results["configs"].values():
        (run,) = config["runs"]
        assert 0.0 <= run["mAP"] <= 1.0 and 0.0 <= run["uAP"] <= 1.0
    assert set(results["heatmaps"]) == set(sweeps.VIDEO_LOSSES)


def test_stored_results_match_the_script_tables() -> None:
    sweeps = load_script()
    stored = json.loads((ROOT / "book" / "data" / "hapvr_sweeps.json").read_text())
    assert stored["tables"] == {name: {row: sweeps.variant_key(v) for row, v in table.items()}
                                for name, table in sweeps.TABLES.items()}
    assert all(len(c["runs"]) == len(stored["seeds"]) for c in stored["configs"].values())
