"""Run every benchmark script in this folder, one after another."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n===== {script.name} =====", flush=True)
        subprocess.run([sys.executable, str(script)], cwd=HERE, check=False)
