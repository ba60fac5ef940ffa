"""A smoke training of HAP-VR with 1 process vs 2 gloo processes under torchrun, on the CPU.

Usage: ``python benchmarks/train_processes.py [--pipeline hapvr] [--short 5] [--long 45] [--repeats 3]``.
Each run times :func:`hapref.train.fit` only (no start-up, no data preparation) for ``--short`` and
``--long`` steps; the difference divided by ``long - short`` is the time of a training step, the
evaluation at the end cancelling out. Every process uses one thread (``OMP_NUM_THREADS=1``), so 2
processes use twice the cores of 1; the profile's batch is per process, so 2 processes train on twice
the videos per step. The processes bind 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import replace


def run_fit(pipeline: str, steps: int) -> None:
    """Inside each process: build the smoke task, time ``fit`` and print the time on rank 0."""
    from hapref import distributed as hd
    from hapref.train import fit
    from hapref.train.registry import load_pipeline

    hd.init_distributed("gloo")
    module = load_pipeline(pipeline)
    task, config = module.build("smoke", module.DEFAULT_LOSS, 0, progress=False)
    hd.barrier()
    start = time.perf_counter()
    fit(task, replace(config, steps=steps, warmup_steps=min(config.warmup_steps, steps), eval_every=0),
        progress=False)
    if hd.is_main_process():
        print(f"FIT_SECONDS {time.perf_counter() - start:.4f}", flush=True)
    hd.destroy_distributed()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(pipeline: str, steps: int, processes: int) -> float:
    """Seconds of ``fit`` for ``steps`` steps with ``processes`` processes."""
    inner = [__file__, "--inner", pipeline, str(steps)]
    if processes == 1:
        command = [sys.executable, *inner]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={processes}",
                   "--master_addr=127.0.0.1", f"--master_port={free_port()}", *inner]
    out = subprocess.run(command, capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout
    return float(next(line.split()[1] for line in out.splitlines() if line.startswith("FIT_SECONDS")))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--inner":
        run_fit(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pipeline", default="hapvr")
    parser.add_argument("--short", type=int, default=5)
    parser.add_argument("--long", type=int, default=45)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not 1 <= args.short < args.long:
        parser.error("need 1 <= --short < --long")
    for processes in (1, 2):
        per_step = [(timed(args.pipeline, args.long, processes) - timed(args.pipeline, args.short, processes))
                    / (args.long - args.short) for _ in range(args.repeats)]
        print(f"{args.pipeline} smoke, {processes} process(es): {1000 * statistics.median(per_step):.0f} ms per "
              f"step (median of {args.repeats}: {', '.join(f'{1000 * t:.0f}' for t in per_step)})", flush=True)


if __name__ == "__main__":
    main()
