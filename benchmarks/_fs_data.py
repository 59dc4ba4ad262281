"""Loading the FUFS paper's data sets and the credit file for the feature-selection benchmarks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def require(relative: str) -> Path:
    path = SHARED / relative
    if not path.exists():
        sys.exit(f"skipped: {path} is not available (the ../shared/datasets folder is absent)")
    return path


def crime():
    """319 × 121 features; protected = column index 2 (racepctblack) > 0.06 as the paper's code
    (248 / 71); label = last column (ViolentCrimesPerPop > 0.15); K = 2 (crime_info.txt)."""
    table = np.loadtxt(require("fufs/crime.csv"), delimiter=",")
    group = np.where(table[:, 2] > 0.06, "racepctblack>0.06", "racepctblack<=0.06")
    X = np.delete(table[:, :-1], 2, axis=1)
    names = [f"col{j}" for j in range(table.shape[1] - 1) if j != 2]
    return X, group, table[:, -1].astype(int), names


def google():
    """701 × 1,695 binary features (659 of them constant); protected = column index 1; label = last."""
    table = np.loadtxt(require("fufs/google.csv"), delimiter=",")
    X = np.delete(table[:, :-1], 1, axis=1)
    return X, table[:, 1].astype(int), table[:, -1].astype(int)


def credit():
    """30,000 × 22 (UCI default of credit card clients); protected = SEX; label = default next month."""
    import pandas as pd

    frame = pd.read_csv(require("credit/UCI_Credit_Card.csv"))
    label = frame.columns[-1]
    X = frame.drop(columns=["ID", "SEX", label]).to_numpy(dtype=float)
    return X, frame["SEX"].to_numpy(), frame[label].to_numpy()
