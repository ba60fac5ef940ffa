"""Timing and peak-memory helpers shared by the benchmark scripts (run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch


def seconds(fn: Callable[[], object], device: torch.device, repeats: int,
            reduce: Callable[[list[float]], float] = statistics.median) -> float:
    """``reduce`` (default: median) of ``repeats`` timed calls of ``fn`` after one warm-up call (allocator,
    oneDNN / cuDNN kernel selection); CUDA work is synchronised before and after each call."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return reduce(times)


def _rss_high_water_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def peak_memory_mib(fn: Callable[[], object], device: torch.device) -> float:
    """Peak extra memory of one call of ``fn``: the CUDA allocator peak, or on the CPU the growth of the
    resident-set high-water mark after resetting it (``/proc/self/clear_refs``; NaN where that is not allowed)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return float("nan")
    base = _rss_high_water_kib()
    fn()
    return (_rss_high_water_kib() - base) / 1024


def write_sweep(profile: str, out: str | Path, sweep: Callable[[], dict], threads: int | None = None) -> Path:
    """Run ``sweep()`` as the chapters compute and store its results as JSON at ``out``; returns the path.

    float64 on CPUs (``hapref.utils.portable_precision``; the ``full`` GPU profile keeps float32), so the stored
    rows reproduce on every CPU; ``threads`` pins torch's thread count (the chapters' quick runs use one). The
    JSON gains ``dtype``, ``threads``, ``wall_seconds`` and ``cpu_seconds``. The caller's default dtype and thread
    count are restored afterwards (the sweeps' ``main`` also runs inside the tests).
    """
    import json

    from hapref.files import atomic_write_bytes
    from hapref.utils import portable_precision

    previous = torch.get_default_dtype(), torch.get_num_threads()
    dtype = portable_precision(profile != "full")
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        results = sweep()
        results.update(dtype=str(dtype).removeprefix("torch."), threads=torch.get_num_threads(),
                       wall_seconds=round(time.perf_counter() - wall, 1),
                       cpu_seconds=round(time.process_time() - cpu, 1))
        return atomic_write_bytes(out, (json.dumps(results, indent=1, sort_keys=True) + "\n").encode())
    finally:
        torch.set_default_dtype(previous[0])
        torch.set_num_threads(previous[1])
