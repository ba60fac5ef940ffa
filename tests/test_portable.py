"""The book's numbers do not depend on the CPU: data bytes are identical and float64 training agrees.

Each check runs the same script in two fresh interpreters: one with this machine's kernels, one with the
kernels of an older x86 CPU (``ATEN_CPU_CAPABILITY=default``: ATen's scalar code; oneDNN limited to SSE4.1;
MKL to SSE4.2) and three threads for the data. Generated videos and augmented views must be byte-identical;
a float64 training run must give the same metrics to far more digits than the book prints. The emulated run
also generates its data under a float64 default dtype (``portable_precision``), which must not change a byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

EMULATED = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
            "OMP_NUM_THREADS": "1"}
NATIVE_KEYS = tuple(EMULATED)

SCRIPT = r"""
import hashlib, json, sys
import torch
from hapref.data import build_copy_benchmark
from hapref.data.augment import ClipAugmenter
from hapref.data.highlights import make_highlight_video
from hapref.data.finegrained import make_finegrained_videos

if "f64" in sys.argv:  # generated data must depend neither on the default dtype nor on the thread count
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(3)
digest = lambda t: hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()
out = {"threads": torch.get_num_threads()}
bench = build_copy_benchmark("smoke", seed=3, cache=False)
out["benchmark"] = bench.fingerprint()
clips = torch.stack([bench.train[i] for i in range(4)])
out["views"] = {s: digest(ClipAugmenter(s, num_frames=6, size=32)(clips, torch.Generator().manual_seed(1)))
                for s in ("weak", "strong")}
out["highlight"] = digest(make_highlight_video(num_clips=3, clip_frames=(12, 14), critical_frames=4, size=32,
                                               seed=2).frames)
train, test = make_finegrained_videos(num_classes=2, subclasses_per_class=2, train_per_subclass=2,
                                      test_per_subclass=2, frames=(4, 6), size=32)
out["finegrained"] = hashlib.sha256(b"".join(v.numpy().tobytes() for v in [*train.videos, *test.videos])).hexdigest()
if "train" in sys.argv:
    from hapref.train.loop import fit
    from hapref.train.radial import build
    from hapref.utils import portable_precision
    portable_precision()
    run = fit(*build("smoke", "radial", seed=0, progress=False), progress=False)
    out["metrics"] = {k: float(v) for k, v in run.metrics.items()}
    out["loss"] = [h["loss"] for h in run.history]
print("RESULT" + json.dumps(out))
"""


def _run(env_extra: dict[str, str], tmp_path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in NATIVE_KEYS}
    env.update(env_extra, HAPREF_DATA=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    return json.loads(line.removeprefix("RESULT"))


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    native = _run({}, tmp_path_factory.mktemp("native"), "train")
    emulated = _run(EMULATED, tmp_path_factory.mktemp("emulated"), "train", "f64")
    return native, emulated


def test_the_emulation_changes_the_arithmetic(tmp_path):
    # Guard: the environment really switches kernels (float32 randn takes another code path), so the
    # equalities below are not vacuous.
    code = "import torch; print(torch.randn(64, generator=torch.Generator().manual_seed(0)).sum().item())"
    env = {k: v for k, v in os.environ.items() if k not in NATIVE_KEYS}
    native = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout
    emulated = subprocess.run([sys.executable, "-c", code], env={**env, **EMULATED}, capture_output=True,
                              text=True).stdout
    if native == emulated:
        pytest.skip("this CPU's fastest kernels are the emulated ones: nothing to compare")
    assert native and emulated


def test_generated_data_is_byte_identical(both):
    native, emulated = both
    assert emulated["threads"] == 3 != native["threads"]
    for key in ("benchmark", "views", "highlight", "finegrained"):
        assert native[key] == emulated[key], key


def test_float64_training_agrees_far_beyond_printed_digits(both):
    native, emulated = both
    assert native["metrics"].keys() == emulated["metrics"].keys()
    for key, value in native["metrics"].items():
        assert abs(value - emulated["metrics"][key]) < 1e-9, (key, value, emulated["metrics"][key])
    gaps = [abs(a - b) / max(abs(a), 1e-12) for a, b in zip(native["loss"], emulated["loss"])]
    assert len(gaps) == len(native["loss"]) > 0 and max(gaps) < 1e-9, max(gaps)
