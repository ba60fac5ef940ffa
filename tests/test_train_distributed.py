"""Distributed training: 2 gloo ranks against one process (HAP-VR's first step), and the trainer under torchrun.

The workers are spawned once (127.0.0.1 and a free port); the torchrun run is a subprocess bound to
127.0.0.1. The smoke data are prepared in this process first, so the ranks read them from the cache.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from hapref import distributed as hd
from hapref.train import distributed_step as ds
from hapref.train import TrainConfig, fit
from hapref.train.hapvr import HAPVRTask, Variant, prepare_data

WORLD = 2


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hapvr_first_step(ap_scope: str, batch: dict | None = None) -> dict:
    """Loss and averaged gradients of HAP-VR's first smoke step (this rank's batch, or ``batch``)."""
    task = HAPVRTask("smoke", Variant(ap_scope=ap_scope))
    torch.manual_seed(0)
    model = task.build_model()
    batch = task.batch(0, torch.device("cpu")) if batch is None else batch
    terms = task.loss(model, batch)
    terms["loss"].backward()
    hd.average_gradients(model)
    return {"loss": torch.tensor(hd.all_reduce_mean(terms["loss"])), "batch": batch, "local": terms["loss"].detach(),
            "terms": {k: torch.tensor(hd.all_reduce_mean(v)) for k, v in terms.items()},
            "grads": {name: p.grad.clone() for name, p in model.named_parameters()}}


class ShardedToy:
    """y = x·w + noise with dropout (the RNG state matters); each rank takes its rows of the step's 2·16 rows."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at
        self.w = torch.randn(6, 1, generator=torch.Generator().manual_seed(5))

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))

    def batch(self, step: int, device: torch.device) -> torch.Tensor:
        if step == self.fail_at:
            raise KeyboardInterrupt("simulated interruption")
        rows = ds.rank_batch(torch.randperm(40, generator=torch.Generator().manual_seed(step)), 16)
        return torch.randn(40, 6, generator=torch.Generator().manual_seed(99))[rows].to(device)

    def loss(self, model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": (model(x) - x @ self.w).pow(2).mean()}

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        x = torch.randn(8, 6, generator=torch.Generator().manual_seed(7))
        return {"mse": float((model(x) - x @ self.w).pow(2).mean())}


def tca_case() -> dict:
    """TCA's similarities with every rank's keys and the bank after enqueueing every rank's distractors."""
    from hapref.losses.memory_bank import MemoryBank
    g = torch.Generator().manual_seed(11)
    query, key, negatives = (torch.nn.functional.normalize(torch.randn(n, 5, generator=g), dim=-1) for n in (6, 6, 8))
    clips = torch.tensor([0, 1, 2, 3, 1, 5])                # clip 1 on both ranks: never its own negative
    bank = MemoryBank(8, 5)
    bank.enqueue(negatives[:2], torch.tensor([-1, -2]))
    rows = hd.rank_rows(6 // hd.get_world_size())
    sims, valid = ds.global_contrastive_similarities(query[rows], key[rows], bank, clips[rows])
    ds.enqueue_all_ranks(bank, negatives[2:][rows], torch.arange(-3, -9, -1)[rows])
    return {"sims": sims, "valid": valid, "bank": bank.filled()[0], "ids": bank.filled()[1]}


def autossvh_vc_case() -> dict:
    """AutoSSVH's view contrast (Eq. 14–15) over the views of all ranks' videos: loss and averaged gradients."""
    from hapref.losses.autossvh import view_contrast
    g = torch.Generator().manual_seed(13)
    views = torch.randn(2, 8, 6, generator=g, dtype=torch.float64)
    torch.manual_seed(2)
    layer = nn.Linear(6, 4).double()
    rows = hd.rank_rows(8 // hd.get_world_size())
    codes = [hd.all_gather_with_grad(torch.tanh(layer(v[rows]))) for v in views]
    loss = view_contrast(codes[0], codes[1], temperature=0.5)
    loss.backward()
    hd.average_gradients(layer)
    return {"loss": loss.detach(), "weight": layer.weight.grad.clone()}


TOY = TrainConfig(steps=6, lr=1e-2, seed=3, eval_every=3, amp=False)


def resume_runs(out_dir: Path) -> dict:
    """A 2-rank run interrupted at step 4 and resumed vs uninterrupted; a 1-process run resumed by 2 ranks."""
    reference = fit(ShardedToy(), TOY, progress=False)
    with pytest.raises(KeyboardInterrupt):
        fit(ShardedToy(fail_at=4), TOY, out_dir=out_dir / "same", progress=False)
    resumed = fit(ShardedToy(), TOY, out_dir=out_dir / "same", resume=True, progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = fit(ShardedToy(), TOY, out_dir=out_dir / "other", resume=True, progress=False)
    return {"exact": all(torch.equal(v, resumed.model.state_dict()[k]) for k, v in reference.model.state_dict().items()),
            "losses": [[h["loss"] for h in r.history] for r in (reference, resumed)],
            "metrics": [reference.metrics, resumed.metrics, other.metrics],
            "warnings": [str(w.message) for w in caught], "other_steps": len(other.history)}


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    assert hd.init_distributed("gloo")
    out = {"global": hapvr_first_step("global"), "per_rank": hapvr_first_step("per_rank"),
           "rows": ds.gather_rows(lambda rows: torch.stack([rows, rows * 0 + rank], 1), 5),
           "batch": ds.rank_batch(torch.arange(10, 0, -1), 3),
           "pool": ds.pool_pick(torch.Generator().manual_seed(0), 4),
           "resume": resume_runs(Path(out_dir)), "tca": tca_case(),
           "vc": autossvh_vc_case()}
    hd.barrier()
    hd.destroy_distributed()
    torch.save(out, os.path.join(out_dir, f"rank{rank}.pt"))


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    prepare_data("smoke")                              # cached for the workers
    out = tmp_path_factory.mktemp("ranks")
    with pytest.raises(KeyboardInterrupt):             # a one-process run the 2 ranks resume
        fit(ShardedToy(fail_at=4), TOY, out_dir=out / "other", progress=False)
    mp.spawn(_worker, args=(WORLD, free_port(), str(out)), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]


def global_batch(ranks: list[dict], scope: str) -> dict:
    parts = [r[scope]["batch"] for r in ranks]
    return {"features": torch.cat([p["features"] for p in parts]), "teacher": torch.cat([p["teacher"] for p in parts]),
            "relevance": torch.block_diag(*[p["relevance"] for p in parts])}


def test_hapvr_two_ranks_equal_one_process_with_the_global_batch(ranks):
    """2 ranks with batch B: the loss and gradients of one process on the 2B batch (block-diagonal labels)."""
    batches = [r["global"]["batch"] for r in ranks]
    assert not torch.equal(batches[0]["features"], batches[1]["features"])          # each rank its own shard
    reference = hapvr_first_step("global", global_batch(ranks, "global"))         # no group here: one process
    assert set(reference["terms"]) == {"infonce", "sshn", "reg", "video_ap", "frame_ap", "loss"}
    for r in ranks:
        for name, value in reference["terms"].items():
            torch.testing.assert_close(r["global"]["terms"][name], value, rtol=1e-5, atol=1e-6)
        for name, grad in reference["grads"].items():
            torch.testing.assert_close(r["global"]["grads"][name], grad, rtol=1e-4, atol=1e-6)
    assert sum(g.abs().sum() for g in reference["grads"].values()) > 0


def test_per_rank_scope_ranks_each_rank_s_own_batch(ranks):
    """ap_scope='per_rank' (the released HAP-VR): each rank ranks its own batch only, not the global batch."""
    for r in ranks:
        assert torch.equal(r["per_rank"]["batch"]["features"], r["global"]["batch"]["features"])   # same data
    own = hapvr_first_step("global", ranks[1]["per_rank"]["batch"])["loss"]        # one process, rank 1's batch
    torch.testing.assert_close(ranks[1]["per_rank"]["local"], own, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ranks[0]["per_rank"]["loss"], (ranks[0]["per_rank"]["local"] + own) / 2,
                               rtol=1e-5, atol=1e-6)
    assert abs(float(ranks[0]["per_rank"]["loss"]) - float(ranks[0]["global"]["loss"])) > 1e-4


def test_rank_helpers(ranks):
    for r in ranks:        # row-sharded computation gathered in row order on every rank
        assert r["rows"].tolist() == [[0, 0], [1, 0], [2, 0], [3, 1], [4, 1]]
    assert ranks[0]["batch"].tolist() == [10, 9, 8] and ranks[1]["batch"].tolist() == [7, 6, 5]
    assert ranks[0]["pool"] != ranks[1]["pool"]
    with pytest.raises(ValueError, match="ap_scope"):
        Variant(ap_scope="everywhere")


def test_torchrun_trains_hapvr_with_one_eval_line(tmp_path):
    """``torchrun --nproc_per_node=2 -m hapref.train hapvr``: one eval line, world_size 2 recorded, one checkpoint."""
    prepare_data("smoke")
    out = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", "-m", "hapref.train", "hapvr",
               "--profile", "smoke", "--out", str(out), "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-3000:]
    eval_lines = [line for line in done.stdout.splitlines() if line.startswith("eval:")]
    assert len(eval_lines) == 1, done.stdout
    config = json.loads((out / "config.json").read_text())
    assert config["world_size"] == 2
    assert (out / "checkpoint.pt").is_file() and json.loads((out / "metrics.json").read_text())["mAP"] >= 0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log if "loss" in e] == list(range(1, 11))


def test_resume_with_two_ranks(ranks, tmp_path):
    """Same world size: bit for bit (every rank's RNG state is saved); another world size: continues and says so."""
    main, other = ranks[0]["resume"], ranks[1]["resume"]
    assert main["exact"] and other["exact"]
    assert main["losses"][0] == main["losses"][1] and len(main["losses"][0]) == TOY.steps
    assert main["metrics"][0] == main["metrics"][1] and other["metrics"] == [{}, {}, {}]   # rank 0 alone evaluates
    assert main["other_steps"] == TOY.steps and "mse" in main["metrics"][2]
    assert any("world size 1" in w and "2 process" in w for w in main["warnings"]), main["warnings"]
    assert not any("world size" in w for w in other["warnings"])
    single = fit(ShardedToy(), TOY, progress=False)                  # one process draws other batches
    assert [h["loss"] for h in single.history] != main["losses"][0]


def test_tca_negatives_and_bank_of_all_ranks(ranks):
    """Each rank's rows equal one process's rows on the global batch; both banks hold every rank's keys."""
    reference = tca_case()                            # one process: all 6 anchors, all 6 distractor keys
    for r, result in enumerate(ranks):
        rows = slice(3 * r, 3 * r + 3)
        torch.testing.assert_close(result["tca"]["sims"], reference["sims"][rows])
        assert torch.equal(result["tca"]["valid"], reference["valid"][rows])
        assert torch.equal(result["tca"]["bank"], reference["bank"])
        assert torch.equal(result["tca"]["ids"], reference["ids"])
    assert not reference["valid"][1, 3] and not reference["valid"][4, 1]    # clip 1's other view is no negative
    assert reference["valid"][:, :5].sum() == 6 * 5 - 2


def test_autossvh_view_contrast_of_all_ranks(ranks):
    reference = autossvh_vc_case()                    # one process: both views of all 8 videos
    for result in ranks:
        torch.testing.assert_close(result["vc"]["loss"], reference["loss"], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(result["vc"]["weight"], reference["weight"], rtol=1e-6, atol=1e-6)
    assert reference["weight"].abs().sum() > 0
