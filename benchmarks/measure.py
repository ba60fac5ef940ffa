"""Timing and peak-memory helpers shared by the benchmark scripts (run as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def sweep_arithmetic(float64: bool = True, threads: int | None = None) -> Iterator[torch.dtype]:
    """Inside the block: the chapters' arithmetic (``hapref.utils.portable_precision(float64)``, float64 on CPUs)
    and ``threads`` torch threads (unchanged when None); yields the default dtype. The caller's default dtype
    and thread count are restored afterwards (the sweeps' ``main`` also runs inside the tests)."""
    from hapref.utils import portable_precision

    previous = torch.get_default_dtype(), torch.get_num_threads()
    dtype = portable_precision(float64)
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield dtype
    finally:
        torch.set_default_dtype(previous[0])
        torch.set_num_threads(previous[1])


def write_sweep(profile: str, out: str | Path, sweep: Callable[[], dict], threads: int | None = None) -> Path:
    """Run ``sweep()`` as the chapters compute and store its results as JSON at ``out``; returns the path.

    float64 on CPUs (``hapref.utils.portable_precision``; the ``full`` GPU profile keeps float32), so the stored
    rows reproduce on every CPU; ``threads`` pins torch's thread count (the chapters' quick runs use one). The
    JSON gains ``dtype``, ``threads``, ``wall_seconds`` and ``cpu_seconds``. The caller's default dtype and thread
    count are restored afterwards (the sweeps' ``main`` also runs inside the tests).
    """
    import json

    from hapref.files import atomic_write_bytes

    with sweep_arithmetic(profile != "full", threads) as dtype:
        wall, cpu = time.perf_counter(), time.process_time()
        results = sweep()
        results.update(dtype=str(dtype).removeprefix("torch."), threads=torch.get_num_threads(),
                       wall_seconds=round(time.perf_counter() - wall, 1),
                       cpu_seconds=round(time.process_time() - cpu, 1))
        return atomic_write_bytes(out, (json.dumps(results, indent=1, sort_keys=True) + "\n").encode())


class SweepFile:
    """A sweep's JSON file that grows one finished run at a time, so an interrupted sweep loses nothing.

    Layout (the book's convention): ``"runs": {variant: [{"seed", "data_seed", metric…}]}``, ``"untrained":
    {"<data seed>": {method: {metric…}}}``, ``"claims"``, plus ``meta`` (profile, settings) and the accumulated
    ``wall_seconds`` / ``cpu_seconds`` of every run and training-free evaluation stored. Re-running with the same
    ``meta`` resumes: :meth:`done` says which (variant, seed, data seed) are stored already. A file written with
    other ``meta`` is refused (naming the differing keys) rather than mixed with new runs.
    """

    def __init__(self, out: str | Path, meta: dict, claims: list[dict]) -> None:
        import json

        self.path = Path(out)
        self.data = {"runs": {}, "untrained": {}, "claims": claims, "wall_seconds": 0.0, "cpu_seconds": 0.0,
                     **meta}
        self.meta = meta
        if self.path.exists():
            stored = json.loads(self.path.read_text())
            differ = sorted(k for k in meta if stored.get(k) != meta[k])
            if differ:
                raise SystemExit(f"{self.path} was written with other settings ({', '.join(differ)}: "
                                 f"{[stored.get(k) for k in differ]} vs {[meta[k] for k in differ]}); "
                                 f"choose another --out or delete it")
            self.data.update({k: stored[k] for k in ("runs", "untrained", "wall_seconds", "cpu_seconds")
                              if k in stored})
            self.data.update({k: v for k, v in stored.items() if k not in self.data})
        self.data["claims"] = claims

    def done(self, variant: str, seed: int, data_seed: int) -> bool:
        return any(r["seed"] == seed and r["data_seed"] == data_seed for r in self.data["runs"].get(variant, []))

    def has_untrained(self, data_seed: int) -> bool:
        return str(data_seed) in self.data["untrained"]

    def timed(self, fn: Callable[[], object]) -> tuple[object, float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        return result, time.perf_counter() - wall, time.process_time() - cpu

    def ensure_untrained(self, data_seed: int, measure: Callable[[], dict]) -> None:
        """Measure and store the training-free methods of instance ``data_seed`` unless they are stored."""
        if not self.has_untrained(data_seed):
            value, wall, cpu = self.timed(measure)
            self.add("untrained", {str(data_seed): value}, wall, cpu)

    def run_missing(self, variants: list[str], seeds: list[int], data_seed: int,
                    train: Callable[[str, int], dict], summary: Callable[[dict], str]) -> None:
        """Train every (variant, seed) of instance ``data_seed`` not stored yet, appending each run as it ends
        (``train(variant, seed)`` returns the row) and printing ``summary(row)`` with its time on stderr."""
        for variant in variants:
            for seed in seeds:
                if self.done(variant, seed, data_seed):
                    continue
                row, wall, cpu = self.timed(lambda: train(variant, seed))
                self.add("runs", row, wall, cpu, variant=variant)
                print(f"{variant} seed={seed} data_seed={data_seed}: {summary(row)} ({wall:.1f} s)",
                      file=sys.stderr, flush=True)

    def add(self, key: str, value: object, wall: float, cpu: float, variant: str | None = None) -> None:
        """Store a run (``variant`` given: appended to ``runs[variant]``) or extra data under ``key``; write."""
        if variant is not None:
            runs = self.data["runs"].setdefault(variant, [])
            runs.append(value)
            runs.sort(key=lambda r: (r["data_seed"], r["seed"]))
        elif key == "untrained":
            self.data["untrained"].update(value)
        else:
            self.data[key] = value
        self.data["wall_seconds"] = round(self.data["wall_seconds"] + wall, 1)
        self.data["cpu_seconds"] = round(self.data["cpu_seconds"] + cpu, 1)
        self.write()

    def write(self) -> Path:
        import json

        from hapref.files import atomic_write_bytes

        self.data["dtype"] = str(torch.get_default_dtype()).removeprefix("torch.")
        self.data["threads"] = torch.get_num_threads()
        return atomic_write_bytes(self.path, (json.dumps(self.data, indent=1, sort_keys=True) + "\n").encode())


def machine(device: torch.device | str = "cpu") -> dict:
    """The machine a benchmark ran on, stored beside its numbers: CPU model and cores, torch threads and
    version, the GPU's name where the device is CUDA."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    device = torch.device(device)
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "device": device.type,
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None}


def write_results(out: str | Path, benchmark: str, settings: dict, rows: list[dict],
                  device: torch.device | str = "cpu") -> Path:
    """Store a benchmark's measured ``rows`` as JSON at ``out`` with its ``settings`` and the machine (the
    book's Performance appendix renders its tables from these files, never from typed numbers)."""
    import datetime
    import json

    from hapref.files import atomic_write_bytes

    data = {"benchmark": benchmark, "settings": settings, "machine": machine(device),
            "date": datetime.date.today().isoformat(), "rows": rows}
    return atomic_write_bytes(Path(out), (json.dumps(data, indent=1) + "\n").encode())
