"""How long ``import ares_viewer`` takes in a fresh process, against ``import pandas`` measured in the same run.

    python3 -m benchmarks.bench_import            # 7 fresh processes of each
    python3 -m benchmarks.bench_import --runs 15

Each figure is the median of the runs, measured inside the child with ``time.perf_counter`` around the import
alone (the interpreter's own start is left out). The machines are shared and noisy, so the ratio to pandas, the
import a notebook pays anyway, is the figure to compare across machines.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

_CHILD = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def import_seconds(module: str, runs: int) -> float:
    """The median time to import ``module`` in a fresh interpreter."""
    times = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD.format(module=module)], check=True, capture_output=True, text=True
        ).stdout
        times.append(float(out.strip()))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    ours = import_seconds("ares_viewer", args.runs)
    pandas = import_seconds("pandas", args.runs)
    print(f"import ares_viewer: {ours:.3f} s (median of {args.runs} fresh processes)")
    print(f"import pandas:      {pandas:.3f} s")
    print(f"ratio ares_viewer / pandas: {ours / pandas:.2f}")


if __name__ == "__main__":
    main()
