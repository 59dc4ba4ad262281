"""``import fairaudit``: every public name as before, loaded on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import fairaudit


def test_every_public_name_resolves_to_its_module_object():
    from fairaudit.audit import run_audit
    from fairaudit.pca import FairPCA

    for name in fairaudit.__all__:
        assert getattr(fairaudit, name) is not None
    assert fairaudit.run_audit is run_audit and fairaudit.FairPCA is FairPCA
    assert set(fairaudit.__all__) <= set(dir(fairaudit))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        fairaudit.nothing_here  # noqa: B018


def test_importing_the_package_loads_no_family_and_no_estimator_library():
    code = ("import sys, fairaudit; "
            "print(sorted(m for m in ('fairaudit.models', 'fairaudit.fs', 'fairaudit.nmf', 'fairaudit.cpd', 'sklearn') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
    star = subprocess.run([sys.executable, "-c", "from fairaudit import *; print(PCA.__name__, load.__name__)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert star == "PCA load"
