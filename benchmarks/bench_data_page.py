"""The Data page on a large upload: seconds per interaction and preparations per rerun.

Writes a survey-like CSV (an ``id`` column, a text ``group`` column, 20 numeric features; 15 % of
group b's rows and 3 % of group a's miss a cell of ``x3``: an unequal drop), then drives the Data page through
Streamlit's AppTest in this one process, as a user would: upload it, choose the sensitive column,
choose “drop rows with a missing cell”, rerun without a change, press “Use this data”, switch
to the median, switch back to drop. For each step it prints the seconds of the script run and how
many times ``fairaudit.prepare`` ran (the page keeps the prepared data per session on the file and
the roles, so a rerun without a change and “Use this data” prepare nothing), and, for reference,
one ``prepare`` of the same roles on its own. Resident memory is the process's after the steps.

    flock /tmp/fairaudit-heavy.lock python benchmarks/bench_data_page.py [--rows 100000,1000000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from _common import machine, status_mb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import fairaudit  # noqa: E402
from fairaudit import prepare, read_table  # noqa: E402


def write_csv(path: Path, rows: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with pacsv.CSVWriter(str(path), pa.schema(
        [pa.field("id", pa.int64()), pa.field("group", pa.string())] + [pa.field(f"x{j}", pa.float64()) for j in range(20)]
    )) as writer:
        for start in range(0, rows, 200_000):
            n = min(200_000, rows - start)
            group = rng.random(n) < 0.3  # b: 30 % of the rows
            columns = {"id": np.arange(start + 1, start + n + 1), "group": np.where(group, "b", "a")}
            columns.update({f"x{j}": np.round(rng.normal(size=n), 5) for j in range(20)})
            holes = rng.random(n) < np.where(group, 0.15, 0.03)
            columns["x3"] = pa.array(columns["x3"], mask=holes)
            writer.write_table(pa.table(columns))


def run(rows: int, folder: Path) -> None:
    from streamlit.testing.v1 import AppTest

    path = folder / f"survey_{rows}.csv"
    write_csv(path, rows)
    content = path.read_bytes()
    calls = []
    real = fairaudit.prepare
    fairaudit.prepare = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600).run()
        at.switch_page("pages/data.py").run()
        at.radio(key="data-source").set_value("Upload a CSV file").run()
        results = []

        def step(name, action):
            before = len(calls)
            start = time.perf_counter()
            action()
            seconds = time.perf_counter() - start
            assert not at.exception, at.exception
            results.append((name, seconds, len(calls) - before))

        def widget(elements, label):
            return next(w for w in elements if w.label.startswith(label))

        step("upload: read, then the default roles", lambda: at.file_uploader(key="data-upload").set_value((path.name, content, "text/csv")).run())
        step("sensitive: group and id", lambda: widget(at.multiselect, "Sensitive").set_value(["group", "id"]).run())
        step("sensitive: group", lambda: widget(at.multiselect, "Sensitive").set_value(["group"]).run())
        step("missing cells: drop rows", lambda: widget(at.selectbox, "Missing cells").set_value("drop").run())
        step("rerun without a change", lambda: at.run())
        step("Use this data", lambda: at.button(key="roles-apply").click().run())
        step("missing cells: median", lambda: widget(at.selectbox, "Missing cells").set_value("median").run())
        step("missing cells: drop again (kept)", lambda: widget(at.selectbox, "Missing cells").set_value("drop").run())
        warned = any("Rows are lost unequally" in w.value for w in at.warning)
    finally:
        fairaudit.prepare = real
    table = read_table(path, max_mb=10_000)
    start = time.perf_counter()
    prepare(table, sensitive="group", missing="drop")
    alone = time.perf_counter() - start
    print(f"\n{rows:,} rows × 22 columns, {len(content) / 2**20:.0f} MB ({machine()}); unequal-drop warning shown: {warned}")
    print(f"{'step':<44}{'seconds':>9}{'prepares':>10}")
    for name, seconds, prepares in results:
        print(f"{name:<44}{seconds:>9.2f}{prepares:>10}")
    print(f"{'reference: prepare(missing=drop) alone':<44}{alone:>9.2f}{1:>10}")
    print(f"resident memory after the steps: {status_mb('VmRSS'):,.0f} MB (peak {status_mb('VmHWM'):,.0f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000", help="comma-separated row counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for rows in (int(r) for r in args.rows.split(",")):
            run(rows, Path(folder))


if __name__ == "__main__":
    main()
