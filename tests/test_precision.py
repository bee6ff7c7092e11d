"""``precision``: the type of the kernel values a fit computes from features is its own
choice; ``"auto"`` keeps float32 from ``tol >= FLOAT32_GRAM_TOL`` on."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.utils._param_validation import InvalidParameterError

from kernfw import L2SVC, L2SVR, MinimumEnclosingBall, MultiClassSVM
from kernfw.estimators._base import FLOAT32_GRAM_TOL

ESTIMATORS = [MultiClassSVM, L2SVC, L2SVR, MinimumEnclosingBall]


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_precision_chooses_the_kernel_values_type_whatever_tol(cls):
    loose, tight = FLOAT32_GRAM_TOL, FLOAT32_GRAM_TOL / 10
    assert cls(tol=loose)._gram_dtype() is np.float32  # "auto": as before
    assert cls(tol=tight)._gram_dtype() is None  # "auto": the precision of X
    assert cls(tol=tight, precision="float32")._gram_dtype() is np.float32
    assert cls(tol=loose, precision="float64")._gram_dtype() is np.float64


def test_float64_values_change_the_fit_and_float32_agree_within_rounding():
    X, y = make_classification(200, 6, n_informative=4, n_classes=3, random_state=0)
    fits = {
        p: MultiClassSVM(tol=1e-6, max_iter=5000, precision=p, random_state=0).fit(X, y)
        for p in ("float32", "float64", "auto")
    }
    f32, f64, auto = (fits[p].decision_function(X) for p in ("float32", "float64", "auto"))
    np.testing.assert_array_equal(auto, f64)  # tol < 1e-4: "auto" keeps float64 X's values
    assert not np.array_equal(f32, f64)  # the rounded kernel is another problem ...
    np.testing.assert_allclose(f32, f64, atol=1e-3)  # ... within its rounding


def test_dask_refuses_float32_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="precision='float32' runs on the local backend"):
        L2SVC(backend="dask", precision="float32")._gram_dtype()
    assert L2SVC(backend="dask")._gram_dtype() is None
    X, y = make_classification(40, 4, random_state=0)
    with pytest.raises(InvalidParameterError, match="precision"):
        L2SVC(precision="half").fit(X, y)
