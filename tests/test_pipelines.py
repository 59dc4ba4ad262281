"""``sensitive_features`` through scikit-learn's ``Pipeline`` and ``GridSearchCV`` (metadata routing).

The example of ``docs/pipelines.md``: a scaler, a fair PCA and a classifier in one pipeline, the
groups routed to the PCA step only; a grid search over the rank with a scorer that reads the
groups too; and LEACE after an NMF. Each is checked against the same steps run by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import sklearn
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from fairaudit import NMF, EqualMeansPCA, LeaceEraser
from fairaudit.errors import FairAuditError


@pytest.fixture
def routing():
    with sklearn.config_context(enable_metadata_routing=True):
        yield


def _data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    groups = np.where(rng.uniform(size=n) < 0.4, "a", "b")
    X = rng.normal(size=(n, 6)) + (groups == "a")[:, None] * np.array([1.5, 0, 0, 0.8, 0, 0])
    y = (X[:, 1] + 0.5 * X[:, 2] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y, groups


def parity_accuracy(y_true, y_pred, *, sensitive_features):
    """Accuracy less the gap in positive rates between the groups (a scorer that needs the groups)."""
    groups = np.asarray(sensitive_features)
    rates = [np.mean(y_pred[groups == g]) for g in np.unique(groups)]
    return float(np.mean(y_true == y_pred) - (max(rates) - min(rates)))


def _pipeline(rank=2):
    return Pipeline([
        ("scale", StandardScaler()),
        ("pca", EqualMeansPCA(n_components=rank).set_fit_request(sensitive_features=True)),
        ("classify", LogisticRegression()),
    ])


def test_pipeline_routes_the_groups_to_the_fair_step(routing):
    X, y, groups = _data()
    pipe = _pipeline().fit(X, y, sensitive_features=groups)
    by_hand = EqualMeansPCA(n_components=2).fit(StandardScaler().fit_transform(X), sensitive_features=groups)
    assert list(pipe["pca"].groups_) == ["a", "b"]
    np.testing.assert_allclose(pipe["pca"].components_, by_hand.components_, atol=1e-12)
    Z = pipe[:-1].transform(X)
    # the representation the classifier sees has equal group means (Kleindessner et al., Alg. 1)
    np.testing.assert_allclose(Z[groups == "a"].mean(axis=0), Z[groups == "b"].mean(axis=0), atol=1e-10)


def test_grid_search_over_the_rank_with_a_scorer_that_reads_the_groups(routing):
    X, y, groups = _data()
    scorer = make_scorer(parity_accuracy).set_score_request(sensitive_features=True)
    folds = StratifiedKFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(_pipeline(), {"pca__n_components": [1, 2, 3]}, scoring=scorer, cv=folds)
    search.fit(X, y, sensitive_features=groups)
    # the search's scores are those of each fold fitted and scored by hand with the fold's groups
    for index, rank in enumerate([1, 2, 3]):
        scores = []
        for train, test in folds.split(X, y):
            pipe = _pipeline(rank).fit(X[train], y[train], sensitive_features=groups[train])
            scores.append(parity_accuracy(y[test], pipe.predict(X[test]), sensitive_features=groups[test]))
        assert search.cv_results_["mean_test_score"][index] == pytest.approx(np.mean(scores), abs=1e-12)
    assert search.best_params_["pca__n_components"] == [1, 2, 3][int(np.argmax(search.cv_results_["mean_test_score"]))]


def test_leace_after_any_representation(routing):
    """LEACE as a post-step on another family's representation: an NMF's W, the groups routed to
    both steps (vanilla NMF reports its per-group errors with them)."""
    X, _, groups = _data()
    X = np.abs(X)
    pipe = make_pipeline(
        NMF(n_components=3, random_state=0).set_fit_request(sensitive_features=True),
        LeaceEraser().set_fit_request(sensitive_features=True),
    )
    W = pipe.fit_transform(X, sensitive_features=groups)  # the eraser's own rows: NMF's transform would solve W anew
    np.testing.assert_allclose(W[groups == "a"].mean(axis=0), W[groups == "b"].mean(axis=0), atol=1e-10)
    assert list(pipe[0].groups_) == ["a", "b"]


def test_without_routing_the_message_says_how():
    X, y, groups = _data()
    pipe = Pipeline([("scale", StandardScaler()), ("pca", EqualMeansPCA()), ("classify", LogisticRegression())])
    with pytest.raises(FairAuditError, match=r"enable_metadata_routing=True"):
        pipe.fit(X, y)
