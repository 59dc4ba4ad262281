"""The PCA audit of a large CSV against its physical floor: issue 13's first acceptance figure.

Writes a synthetic CSV (20 numeric columns with 5 decimals and a text group column; about
164 MB per million rows, ``bench_read.write_csv``) to a temporary folder, then runs each step in
its own child process, one after the other, and reads the child's wall time and peak resident
memory (``wait4``'s ``ru_maxrss``):

* ``imports`` — each command's interpreter with its imports and nothing read: numpy and
  pyarrow for the floor; for the audit, every module the audit command itself has loaded by
  its end (listed by running it on a 2,000-row copy of the file, then imported in that order —
  the CLI imports some of them only when it needs them, so ``import fairaudit.cli`` alone would
  understate them): the time and memory every run of it starts with, so the ratios are also
  given for the work alone;
* ``floor`` — what no PCA audit can avoid: one Arrow read of the file into a float64 block and
  one BLAS pass for the per-group moments (``X_gᵀX_g`` and the group means), written with plain
  numpy here (not fairaudit's code); run twice, as written and with NumPy's transparent huge
  pages switched off (on a virtual machine first writes into huge pages can cost more than into
  ordinary ones, which fairaudit's reader asks for: the faster of the two is the floor the
  ratios use);
* ``audit`` — the whole command a user types:
  ``python -m fairaudit audit FILE --sensitive group --methods pca --json OUT --quiet``
  (the default variants and ranks of the PCA family; ``--bootstrap 0`` also when the CLI has it,
  so the intervals' own cost is shown apart).

The steps run in turn (imports, floor, audit, …, then again), so that a machine whose speed
drifts slows every step alike; the best of ``--repeat`` runs of each is kept. It prints, per step, seconds and peak MiB (2²⁰ bytes, the file's size too), and the ratios the
issue asks for: the audit's time over the floor's (target ≤ 3×) and its peak memory over the file
size (target ≤ 3×; given with and without the interpreter's own resident memory). Run it alone on
the machine:

    flock /tmp/fairaudit-heavy.lock python benchmarks/bench_pca_scale.py [--rows 1000000] [--csv FILE] [--no-defaults]

(``--csv``: measure an existing file of that shape instead of writing one; ``--no-defaults``:
leave out the audit with the default intervals, which takes ~25 s a run.) The children keep
their compiled modules in a temporary folder (``PYTHONPYCACHEPREFIX``), as an installed package
or any second run does; ``--no-bytecode-cache`` runs them as the environment says (with
``PYTHONDONTWRITEBYTECODE`` set, each run compiles fairaudit's modules again).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine
from bench_read import write_csv

REPO = Path(__file__).resolve().parents[1]

FLOOR_IMPORTS = "import numpy, pyarrow, pyarrow.csv"

MODULES_WRAPPER = """
import runpy, sys
try:
    runpy.run_module("fairaudit", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print("\\n".join(name for name in sys.modules if not name.startswith("__")))
"""

IMPORT_ALL = """
import importlib, sys
for name in sys.argv[1].split(","):
    try:
        importlib.import_module(name)
    except Exception:  # a module that only loads as part of another (rare): the others still count
        pass
"""

FLOOR = """
import sys, time
import numpy as np, pyarrow as pa, pyarrow.csv as pacsv
if sys.argv[2:] == ["ordinary-pages"]:
    np._core.multiarray._set_madvise_hugepage(False)  # NumPy's own switch: no transparent huge pages
start = time.perf_counter()
names = [f"x{j}" for j in range(20)]
table = pacsv.read_csv(sys.argv[1], convert_options=pacsv.ConvertOptions(
    column_types={**{n: pa.float64() for n in names}, "group": pa.string()}))
X = np.empty((table.num_rows, 20), order="F")
for j, name in enumerate(names):
    X[:, j] = table.column(name).to_numpy()
codes = (table.column("group").to_numpy(zero_copy_only=False) == "a").astype(np.intp)
del table
moments = []
for g in (0, 1):
    block = X[codes == g]
    moments.append((block.shape[0], block.mean(axis=0), block.T @ block))
print(time.perf_counter() - start)
"""


PEAK_WRAPPER = """
import atexit, os, runpy, sys
def _peak():
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    with open(os.environ["BENCH_PEAK_FILE"], "w") as out:
        out.write(str(peak / 1024))
atexit.register(_peak)
mode, target, *rest = sys.argv[1:]
sys.argv = [target, *rest]
if mode == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(compile(target, "<step>", "exec"), {"__name__": "__main__"})
"""


BYTECODE: dict[str, str] = {}
"""``{"PYTHONPYCACHEPREFIX": folder}`` when the children cache their bytecode (the default), as an
installed package or any second run does; empty with ``--no-bytecode-cache``."""


def child_env() -> dict[str, str]:
    """The children's environment: this checkout first on the path; with :data:`BYTECODE` set,
    compiled modules cached in a folder of their own (``PYTHONDONTWRITEBYTECODE`` dropped: with
    it, every run compiled fairaudit's ~70 modules again, ~0.15–0.2 s that the floor, whose
    libraries come compiled, never pays)."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(BYTECODE)
    return env


def run_measured(argv: list[str]) -> tuple[float, float, str]:
    """``(wall seconds, peak resident MiB, stdout)`` of ``python argv…`` in a child process.

    The peak is the child's own high-water mark (``VmHWM``, written at exit by a small wrapper):
    ``wait4``'s ``ru_maxrss`` would not do, Linux carries the parent's peak into the child."""
    with tempfile.NamedTemporaryFile("r", suffix=".peak") as peak_file:
        env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "BENCH_PEAK_FILE": peak_file.name}
        start = time.perf_counter()
        child = subprocess.run([sys.executable, "-c", PEAK_WRAPPER, *argv], capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - start
        if child.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:4])} … failed ({child.returncode}): {child.stderr.strip()[-400:]}")
        return seconds, float(open(peak_file.name).read()), child.stdout


def audit_modules(path: Path, folder: Path, extra: list[str]) -> list[str]:
    """The modules the audit command has loaded by its end, in load order: the command run on
    the first 2,000 rows of ``path``."""
    small = folder / "small.csv"
    with open(path, "rb") as source, open(small, "wb") as target:
        for _, line in zip(range(2_001), source, strict=False):
            target.write(line)
    env = child_env()
    argv = ["audit", str(small), "--sensitive", "group", "--methods", "pca", "--json", str(folder / "small.json"), "--quiet", *extra]
    child = subprocess.run([sys.executable, "-c", MODULES_WRAPPER, *argv], capture_output=True, text=True, env=env, check=True)
    return [name for name in child.stdout.split() if name not in sys.builtin_module_names]


def cli_has(flag: str) -> bool:
    """The audit command takes ``flag`` (read from its help)."""
    env = child_env()
    helptext = subprocess.run([sys.executable, "-m", "fairaudit", "audit", "--help"], capture_output=True, text=True, env=env)
    return flag in helptext.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="runs per step (the best is reported)")
    parser.add_argument("--csv", type=Path, default=None, help="an existing file of this shape (20 numeric columns x0…x19 and a text column group)")
    parser.add_argument("--no-defaults", action="store_true", help="leave out the audit with the default intervals")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="as the environment says (PYTHONDONTWRITEBYTECODE: every run compiles fairaudit's modules)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if not args.no_bytecode_cache:
            BYTECODE["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "bytecode")
        path = args.csv or Path(folder) / "large.csv"
        if args.csv is None:
            write_csv(path, args.rows, middle_group=False)
        size_mib = path.stat().st_size / 2**20  # the peaks' unit (VmHWM kB / 1024); in 10⁶ bytes the ratios were 4.9 % low
        bootstrap = ["--bootstrap", "0"] if cli_has("--bootstrap") else []
        modules = audit_modules(path, Path(folder), bootstrap)  # also compiles them into the bytecode cache
        run_measured(["-c", FLOOR_IMPORTS])
        print(f"{path.name}: {size_mib:.0f} MiB; {machine()}; best of {args.repeat}, the steps in turn; "
              f"the audit command loads {len(modules)} modules; bytecode {'cached' if BYTECODE else 'as the environment says'}")
        audit = ["-m", "fairaudit", "audit", str(path), "--sensitive", "group", "--methods", "pca",
                 "--json", str(Path(folder) / "out.json"), "--quiet", "--allow-slow"]
        steps = {
            "imports of the floor (numpy, pyarrow)": ["-c", FLOOR_IMPORTS],
            "imports of the audit (every module it loads)": ["-c", IMPORT_ALL, ",".join(modules)],
            "floor (Arrow read + per-group moments, plain numpy)": ["-c", FLOOR, str(path)],
            "floor, ordinary pages": ["-c", FLOOR, str(path), "ordinary-pages"],
        }
        if not args.no_defaults:
            steps["audit (CLI, PCA family, defaults)"] = audit
        if bootstrap:
            steps["audit (CLI, PCA family, --bootstrap 0)"] = [*audit, *bootstrap]
        runs: dict[str, list] = {name: [] for name in steps}
        for _ in range(args.repeat):
            for name, argv in steps.items():
                runs[name].append(run_measured(argv)[:2])
        results = {name: (min(r[0] for r in found), min(r[1] for r in found)) for name, found in runs.items()}
        for name, (seconds, peak) in results.items():
            print(f"  {name:<55} {seconds:7.2f} s  peak {peak:7.0f} MiB")
        floor_base = results["imports of the floor (numpy, pyarrow)"]
        audit_base = results["imports of the audit (every module it loads)"]
        floor = min(results["floor (Arrow read + per-group moments, plain numpy)"], results["floor, ordinary pages"])
        for name in [n for n in results if n.startswith("audit")]:
            seconds, peak = results[name]
            print(
                f"{name}: time {seconds / floor[0]:.2f}× the floor's, whole commands "
                f"({(seconds - audit_base[0]) / (floor[0] - floor_base[0]):.2f}× after each one's imports); "
                f"peak {peak / size_mib:.2f}× the file ({(peak - audit_base[1]) / size_mib:.2f}× above the imports; "
                f"the floor: {floor[1] / size_mib:.2f}×, {(floor[1] - floor_base[1]) / size_mib:.2f}×)"
            )
        print(json.dumps({"rows": args.rows, "file_mib": size_mib, "steps": results, "runs": runs}))


if __name__ == "__main__":
    main()
