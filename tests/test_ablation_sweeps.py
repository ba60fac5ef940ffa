"""The AutoSSVH sweep script runs every configuration (smoke profile) and the stored file matches it (TCA:
tests/test_tca_sweeps.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    return load_benchmark(name)


def test_autossvh_smoke_sweep_appends_and_resumes(tmp_path, monkeypatch) -> None:
    sweeps = load_script("autossvh_sweeps")
    out = tmp_path / "autossvh.json"
    args = ["--profile", "smoke", "--steps", "2", "--data-seed", "0", "--out", str(out), "--variants",
            "autossvh", "random_mask", "random_independent", "fresh"]
    assert sweeps.main([*args, "--seeds", "0"]) == 0
    first = json.loads(out.read_text())
    assert set(first["runs"]) == {"autossvh", "random_mask", "random_independent", "fresh"}
    assert set(first["untrained"]["0"]) == set(sweeps.UNTRAINED)
    shared = {v: runs[0]["shared_frames"] for v, runs in first["runs"].items() if v != "fresh"}
    assert shared["random_mask"] == 0.0 and shared["random_independent"] > 0
    for runs in first["runs"].values():
        (run,) = runs
        assert (run["seed"], run["data_seed"]) == (0, 0)
        assert 0.0 <= run["mAP@5/autossvh"] <= run["mAP@5"] + 1e-9 <= 1.0 + 1e-9
    assert first["wall_seconds"] > 0 and first["dtype"] == "float64" and first["threads"] == 1

    trained = []                                       # the second call adds seed 1 and retrains nothing else
    original = sweeps.run_one
    monkeypatch.setattr(sweeps, "run_one", lambda s, v, seed: trained.append((v, seed)) or original(s, v, seed))
    assert sweeps.main([*args, "--seeds", "0", "1"]) == 0
    second = json.loads(out.read_text())
    assert sorted(trained) == sorted((v, 1) for v in first["runs"])
    for variant, runs in second["runs"].items():
        assert [r["seed"] for r in runs] == [0, 1] and runs[0] == first["runs"][variant][0]
    assert second["untrained"] == first["untrained"] and second["wall_seconds"] >= first["wall_seconds"]
    with pytest.raises(SystemExit, match="other settings"):        # another profile is refused, not mixed in
        sweeps.main([*args[:2], "--steps", "3", *args[4:], "--seeds", "0"])


@pytest.mark.parametrize("name", ["autossvh_sweeps"])
def test_stored_results_match_the_script(name: str) -> None:
    sweeps = load_script(name)
    stored = json.loads((ROOT / "book" / "data" / f"{name}.json").read_text())
    assert set(stored["runs"]) <= set(sweeps.VARIANTS)
    assert stored["settings"]["steps"] == sweeps.PROFILES[stored["profile"]]["steps"]
    for variant, runs in stored["runs"].items():
        keys = {(r["seed"], r["data_seed"]) for r in runs}
        assert len(keys) == len(runs)
        headline = variant in ("autossvh", "random_independent", "fresh")   # 5 seeds x 2 data seeds
        assert all(len({s for s, d in keys if d == data}) >= (5 if headline else 3)
                   for data in ({0, 1} if headline else {0})), variant
    assert set(stored["untrained"]) == {"0", "1"}
    chosen = stored["validation"]["chosen"]
    expected = {*sweeps.HASHINGS, *(f"{m} + {h}" for m, h in chosen.items())}
    assert all(set(methods) == expected for methods in stored["untrained"].values())
    assert stored["validation"]["data_seed"] == sweeps.VALIDATION_DATA_SEED not in {0, 1}
    for sampler, scores in stored["validation"]["after_sampler"].items():    # the best on validation
        assert scores[chosen[sampler]] == max(scores.values()), sampler
    assert [p["delta"] for p in stored["delta_curve"]["points"]] == list(sweeps.DELTAS)


def test_baselines_are_chosen_on_the_validation_instance_and_stored_beside_the_codes(tmp_path, monkeypatch):
    sweeps = load_script("autossvh_sweeps")
    monkeypatch.setattr(sweeps, "VALIDATION_DATA_SEED", 1)       # the smoke profile's validation instance
    out = tmp_path / "autossvh.json"
    assert sweeps.main(["--profile", "smoke", "--data-seed", "0", "--out", str(out), "--variants",
                        "--baselines"]) == 0
    stored = json.loads(out.read_text())
    validation = stored["validation"]
    assert validation["data_seed"] == 1 and set(validation["hashing"]) == set(sweeps.HASHINGS)
    assert set(validation["chosen"]) == set(sweeps.FRAME_SAMPLERS)
    methods = stored["untrained"]["0"]
    assert {*sweeps.HASHINGS, *(f"{m} + {h}" for m, h in validation["chosen"].items())} == set(methods)
    assert all(0.0 <= row["mAP@5"] <= 1.0 for row in methods.values())
    assert sweeps.main(["--profile", "smoke", "--data-seed", "0", "--out", str(out), "--variants",
                        "--baselines"]) == 0                             # resumes: nothing measured twice
    assert json.loads(out.read_text()) == stored | {"wall_seconds": stored["wall_seconds"],
                                                    "cpu_seconds": stored["cpu_seconds"]}
