"""Tensor input at the data boundary: long-format CSV → dense tensor, with specific errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fairaudit import AuditData, prepare_tensor, read_table, tensor_from_arrays
from fairaudit.errors import (
    DuplicateCellError,
    MissingCellError,
    MissingValueError,
    NonNumericColumnError,
    ParameterError,
    SensitiveColumnError,
    SmallGroupError,
    UnknownColumnError,
)
from fairaudit.samples import load_fair_cpd_tensor, load_sample


def long_csv(shape=(4, 3, 2), seed=0, drop=(), duplicate=None, sensitive=None) -> tuple[bytes, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=shape), 3)
    lines = ["user,item,ctx,rating,sex"]
    for index in itertools.product(*map(range, shape)):
        if index in drop:
            continue
        sex = (sensitive or {}).get(index, "F" if index[0] % 2 == 0 else "M")
        lines.append(f"u{index[0] + 1},i{index[1] + 1},c{index[2] + 1},{X[index]},{sex}")
    if duplicate is not None:
        lines.append(lines[duplicate])
    return ("\n".join(lines) + "\n").encode(), X


def prepare(data: bytes, **options):
    options = {"index": ["user", "item", "ctx"], "value": "rating", "sensitive": "sex", **options}
    return prepare_tensor(read_table(data), **options)


def test_long_format_round_trip_and_shuffled_lines():
    data, X = long_csv()
    header, *body = data.decode().splitlines()
    shuffled = "\n".join([header, *np.random.default_rng(3).permutation(body)]) + "\n"
    for source in (data, shuffled.encode()):
        prepared = prepare(source)
        assert prepared.is_tensor and prepared.tensor_shape == (4, 3, 2)
        np.testing.assert_array_equal(prepared.tensor(), X)
        np.testing.assert_array_equal(prepared.X_raw, X.reshape(4, -1))  # mode-1 unfolding
        assert prepared.tensor_levels[0] == ("u1", "u2", "u3", "u4")
        assert prepared.feature_names[:2] == ("item=i1|ctx=c1", "item=i1|ctx=c2")
        assert prepared.group_sizes() == {"sex=F": 2, "sex=M": 2}
        assert prepared.scaling == "none"
    fingerprint = prepared.fingerprint()
    assert fingerprint["tensor"]["shape"] == [4, 3, 2] and fingerprint["tensor"]["modes"] == ["user", "item", "ctx"]


def test_numeric_levels_sort_numerically_and_two_way_and_four_way():
    lines = ["e,t,v,g"] + [f"{e},{t},{e * 10 + t},{'a' if e < 6 else 'b'}" for e in (10, 2, 1, 7) for t in (10, 9)]
    prepared = prepare_tensor(read_table(("\n".join(lines) + "\n").encode()), index=["e", "t"], value="v", sensitive="g")
    assert prepared.tensor_levels == (("1", "2", "7", "10"), ("9", "10"))
    np.testing.assert_array_equal(prepared.tensor()[:, 0], [19, 29, 79, 109])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 2, 3, 2))
    four = "\n".join(["a,b,c,d,v,s"] + [f"{i},{j},{k},{m},{float(X[i, j, k, m])!r},{i % 2}" for i, j, k, m in itertools.product(*map(range, X.shape))])
    prepared = prepare_tensor(read_table((four + "\n").encode()), index=list("abcd"), value="v", sensitive="s")
    np.testing.assert_array_equal(prepared.tensor(), X)


def test_duplicate_cell_names_both_lines():
    data, _ = long_csv(duplicate=5)
    with pytest.raises(DuplicateCellError, match=r"\(user=u1, item=i3, ctx=c1\) appears on lines 6 and 26"):
        prepare(data)


def test_absent_cells_error_or_fill():
    data, X = long_csv(drop={(2, 1, 0), (2, 2, 1)})
    with pytest.raises(MissingCellError, match=r"cover 22 of the 24 cells .*first \(user=u3, item=i2, ctx=c1\); user 'u3' has 4 of its 6 cells") as caught:
        prepare(data)
    assert "--tensor-fill 0" in caught.value.render("cli")
    filled = prepare(data, fill=0.0)
    expected = X.copy()
    expected[2, 1, 0] = expected[2, 2, 1] = 0.0
    np.testing.assert_array_equal(filled.tensor(), expected)
    assert any("filled 2 absent cell(s)" in line for line in filled.log)


def test_empty_value_and_text_value_and_empty_index():
    data, _ = long_csv()
    lines = data.decode().splitlines()
    no_value = lines[:3] + [",".join(lines[3].split(",")[:3] + ["", lines[3].split(",")[4]])] + lines[4:]
    with pytest.raises(MissingCellError, match="line 4"):
        prepare(("\n".join(no_value) + "\n").encode())
    assert prepare(("\n".join(no_value) + "\n").encode(), fill=-1.0).tensor()[0, 1, 0] == -1.0
    text = lines[:3] + [lines[3].replace(lines[3].split(",")[3], "high")] + lines[4:]
    with pytest.raises(NonNumericColumnError, match="'high' at line 4"):
        prepare(("\n".join(text) + "\n").encode())
    no_index = lines[:3] + ["," + lines[3].split(",", 1)[1]] + lines[4:]
    with pytest.raises(MissingValueError, match="index column 'user' is empty at line 4"):
        prepare(("\n".join(no_index) + "\n").encode())


def test_sensitive_must_be_constant_per_entity():
    data, _ = long_csv(sensitive={(1, 2, 1): "F"})
    with pytest.raises(SensitiveColumnError, match="constant for each user, but 'u2' has 'sex=M' at line 8 and 'sex=F' at line 13"):
        prepare(data)


def test_option_errors():
    data, _ = long_csv()
    with pytest.raises(ParameterError, match="at least two index columns"):
        prepare(data, index=["user"])
    with pytest.raises(UnknownColumnError, match="tensor index column 'itme'.*Did you mean 'item'"):
        prepare(data, index=["user", "itme"])
    with pytest.raises(ParameterError, match="both an index and the value"):
        prepare(data, value="ctx")
    with pytest.raises(ParameterError, match="cannot also be an index"):
        prepare(data, sensitive="user")
    with pytest.raises(SmallGroupError):
        prepare(data, min_group_size=3)


def test_small_groups_drop_entities():
    data, X = long_csv(shape=(5, 2, 2))  # users 1, 3, 5 are F; 2, 4 are M
    lines = data.decode().splitlines()
    lines += [f"u6,i{j},c{k},1.0,X" for j in (1, 2) for k in (1, 2)]
    prepared = prepare(("\n".join(lines) + "\n").encode(), min_group_size=2, small_groups="drop")
    assert prepared.tensor_shape == (5, 2, 2)
    assert prepared.tensor_levels[0] == ("u1", "u2", "u3", "u4", "u5")
    np.testing.assert_array_equal(prepared.tensor(), X)


def test_arrays_and_samples():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3, 2))
    data = AuditData.from_tensor(X, [0, 1] * 3)
    np.testing.assert_array_equal(data.tensor(), X)
    assert data.tensor("center").shape == X.shape
    matrix = AuditData.from_arrays(rng.normal(size=(6, 3)), [0, 1] * 3)
    assert not matrix.is_tensor and matrix.tensor().shape == (6, 3)
    with pytest.raises(MissingValueError):
        tensor_from_arrays(np.full((4, 2, 2), np.nan), [0, 1, 0, 1])
    sample = load_sample("cpd_tensor")
    assert sample.tensor_shape == (120, 10, 6) and sample.group_sizes() == {"population=normal": 60, "population=uniform": 60}
    full = load_fair_cpd_tensor()
    assert full.tensor_shape == (200, 100, 100) and full.group_sizes() == {"normal": 100, "uniform": 100}
    assert len(full.fingerprint()["feature_names"]) == 21
