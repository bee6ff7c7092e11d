"""The kernels of inner products as one compiled scalar function (math.md §0, §4.4).

``k(x_i, x_j)`` of the linear, polynomial, sigmoid and RBF kernels is a function of the
inner product ``⟨x_i, x_j⟩`` and the squared norms ``‖x_i‖²``, ``‖x_j‖²``:
:func:`kernel_of_products` evaluates it, given the code of a
:class:`~kernfw.operators.base.ProductForm`.  Compiled code that computes kernel values
from products (the online-MKL group scores, :mod:`kernfw.solvers.mkl._online_numba`)
calls it, so that each formula is written once, here.
"""

import math

from numba import njit

__all__ = ["LINEAR", "POLY", "RBF", "SIGMOID", "int_power", "rbf_exponent", "kernel_of_products"]

#: codes of the kernels of inner products (:attr:`ProductForm.code`)
LINEAR, POLY, RBF, SIGMOID = 0, 1, 2, 3


@njit(cache=True, inline="always")
def int_power(x, m):
    """``x^m`` for an integer ``m ≥ 0`` by repeated squaring (``x²``, ``x³`` directly)."""
    if m == 2:
        return x * x
    if m == 3:
        return x * x * x
    v = 1.0
    while m > 0:
        if m & 1:
            v *= x
        x *= x
        m >>= 1
    return v


@njit(cache=True, inline="always")
def rbf_exponent(gamma, ip, sq_i, sq_j):
    """``−γ max(sq_i + sq_j − 2 ip, 0)``: the RBF is its ``exp`` (callers that fill a whole
    block take numpy's vectorized ``exp`` of the block of exponents)."""
    return -gamma * max(sq_i + sq_j - 2.0 * ip, 0.0)


@njit(cache=True, inline="always")
def kernel_of_products(code, gamma, coef0, degree, ip, sq_i, sq_j):
    """``k_code(ip, sq_i, sq_j)`` with ``ip = ⟨x_i, x_j⟩``, ``sq_i = ‖x_i‖²``, ``sq_j = ‖x_j‖²``.

    LINEAR: ``ip``; POLY: ``(γ ip + c)^degree``; SIGMOID: ``tanh(γ ip + c)``; RBF:
    ``exp(−γ max(sq_i + sq_j − 2 ip, 0))`` (the squared distance clipped at 0, as
    scikit-learn does).  The squared norms are read by the RBF only.
    """
    if code == LINEAR:
        return ip
    if code == RBF:
        return math.exp(rbf_exponent(gamma, ip, sq_i, sq_j))
    z = gamma * ip + coef0
    if code == SIGMOID:
        return math.tanh(z)
    return int_power(z, degree)
