"""Reading and preparing a large numeric CSV: peak memory and time, Arrow reader vs the references.

Writes synthetic CSVs (20 numeric columns with 5 decimals + a text group column, ~164 MB per
million rows) to a temporary folder, then measures in this one process, for each size:

* ``fairaudit``: ``read_table``, then ``read_table`` + ``prepare`` (the Arrow reader; features
  adjacent, so the matrix is a view of the table), and ``load`` (the same, the table handed over
  as the CLI does);
* ``group in the middle``: the same file with a numeric 0/1 group column between the features:
  ``prepare`` keeping the table (as the dashboard does; the matrix is then a copy) and ``load``
  (the table's memory is rearranged in place and becomes the matrix);
* ``pyarrow.csv.read_csv`` (Arrow's own multi-threaded read into a table: the floor of
  ``bench_pca_scale``), ``pandas.read_csv`` (the reference the issue names) and
  ``pandas.read_csv`` + ``to_numpy``;
* ``pre-Arrow reader`` (``--old``): the ``csv``-module reader this replaced, loaded from git
  (``git show 9821a12:fairaudit/data.py``), for the before/after figures.

Peak memory is the peak resident set size during a step minus the resident size before it
(Linux ``/proc/self/clear_refs`` resets the peak between steps; between steps, freed memory is
returned to the system with ``malloc_trim``). Run it alone on the machine:

    flock /tmp/fairaudit-heavy.lock python benchmarks/bench_read.py [--rows 100000,1000000] [--old]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
from _common import machine, module_at, status_mb

from fairaudit import load, prepare, read_table

OLD_REVISION = "9821a12"


def _release() -> None:
    gc.collect()
    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


def measure(step):
    """(seconds, peak MB above the resident size before the step, result) of ``step()``."""
    _release()
    before = status_mb("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    start = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - start
    return seconds, status_mb("VmHWM") - before, result


def write_csv(path: Path, rows: int, *, middle_group: bool, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with pacsv.CSVWriter(str(path), _schema(middle_group)) as writer:
        for start in range(0, rows, 200_000):
            n = min(200_000, rows - start)
            columns = {f"x{j}": np.round(rng.normal(size=n), 5) for j in range(20)}
            group = rng.integers(0, 2, n)
            if middle_group:
                columns = {**{f"x{j}": columns[f"x{j}"] for j in range(10)}, "group": group,
                           **{f"x{j}": columns[f"x{j}"] for j in range(10, 20)}}
            else:
                columns["group"] = np.where(group == 1, "a", "b")
            writer.write_table(pa.table(columns))


def _schema(middle_group: bool) -> pa.Schema:
    fields = [pa.field(f"x{j}", pa.float64()) for j in range(20)]
    if middle_group:
        return pa.schema(fields[:10] + [pa.field("group", pa.int64())] + fields[10:])
    return pa.schema(fields + [pa.field("group", pa.string())])


def old_reader():
    """The pre-Arrow ``fairaudit.data`` (the ``csv``-module reader), loaded from git."""
    try:
        return module_at(OLD_REVISION, "fairaudit/data.py", "fairaudit._pre_arrow_data")
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"(pre-Arrow reader not measured: {exc})")
        return None


def run(rows: int, folder: Path, old) -> list[dict]:
    plain, middle = folder / f"plain_{rows}.csv", folder / f"middle_{rows}.csv"
    write_csv(plain, rows, middle_group=False)
    write_csv(middle, rows, middle_group=True)
    size = plain.stat().st_size / 2**20
    results = []

    def record(name, path, step):
        seconds, peak, result = measure(step)
        del result
        results.append({"rows": rows, "file_mb": path.stat().st_size / 2**20, "step": name, "seconds": seconds, "peak_mb": peak})

    record("fairaudit read_table", plain, lambda: read_table(plain, max_mb=10_000))
    record("fairaudit read_table + prepare", plain, lambda: prepare(read_table(plain, max_mb=10_000), sensitive="group"))
    record("fairaudit load (table handed over)", plain, lambda: load(plain, sensitive="group", max_mb=10_000))
    record("group in the middle: read_table + prepare", middle,
           lambda: prepare(read_table(middle, max_mb=10_000), sensitive="group"))
    record("group in the middle: load (handed over)", middle, lambda: load(middle, sensitive="group", max_mb=10_000))
    record("pyarrow.csv.read_csv (Arrow's own read)", plain, lambda: pacsv.read_csv(plain, convert_options=pacsv.ConvertOptions(
        column_types={**{f"x{j}": pa.float64() for j in range(20)}, "group": pa.string()})))
    record("pandas.read_csv", plain, lambda: pd.read_csv(plain))
    record("pandas.read_csv + to_numpy", plain, lambda: pd.read_csv(plain).drop(columns="group").to_numpy())
    if old is not None:
        record("pre-Arrow read_table + prepare", plain,
               lambda: old.prepare(old.read_table(plain, max_mb=10_000), sensitive="group"))
    print(f"\n{rows:,} rows × 20 numeric columns + group, {size:.0f} MB ({machine()}):")
    print(f"{'step':<48}{'seconds':>9}{'peak MB':>10}{'peak / file':>13}{'time':>15}")
    arrow = next(r["seconds"] for r in results if r["step"].startswith("pyarrow"))
    for r in results:
        print(f"{r['step']:<48}{r['seconds']:>9.2f}{r['peak_mb']:>10.0f}{r['peak_mb'] / r['file_mb']:>12.2f}×"
              f"{r['seconds'] / arrow:>9.2f}× Arrow")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000", help="comma-separated row counts")
    parser.add_argument("--old", action="store_true", help="also measure the pre-Arrow reader (slow: ~30 s and ~4 GB at 1M rows)")
    args = parser.parse_args()
    old = old_reader() if args.old else None
    with tempfile.TemporaryDirectory() as folder:
        for rows in (int(r) for r in args.rows.split(",")):
            run(rows, Path(folder), old)


if __name__ == "__main__":
    main()
