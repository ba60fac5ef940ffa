"""benchmarks/scoring.py runs end to end on a tiny database and every scorer it times equals the released loop."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_scoring_benchmark_smoke_run() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scoring.py"), "--queries", "2", "--videos", "5",
                          "--frames", "3", "9", "--repeats", "1", "--max-cells", "50", "4096", "--threads", "1",
                          "--gemm-size", "128"], capture_output=True, text=True, timeout=120, check=True)
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ") and "pairs/s" not in line]
    assert len(rows) == 5 and rows[0].startswith("| released loop (pair at a time) | ")
    assert all(float(row.split(" | ")[1].replace(",", "")) > 0 for row in rows)       # pairs/s of every scorer
    diffs = [float(x) for x in re.findall(r"max \|diff\| ([0-9.e+-]+)", run.stdout)]
    assert len(diffs) == 4 and max(diffs) < 1e-5, run.stdout       # kernel-swapped loop, padded, two block sizes
