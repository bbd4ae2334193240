"""Vectorised numpy evaluation of TIR index expressions: at points (exact method) and on
intervals (fast method: fixed block index, relaxed loops).

Variables are looked up by handle (`var_key`) in an environment mapping to numpy arrays
(points) or (lo, hi) pairs of arrays, inclusive (intervals). Only what index arithmetic of
scheduled kernels uses is supported; anything else raises `Unsupported`.

>>> import tvm; from tvm import tirx
>>> x = tirx.Var("x", "int64")
>>> points(x // 4 + x % 4, {var_key(x): np.arange(6)}).tolist()
[0, 1, 2, 3, 1, 2]
>>> [v.tolist() for v in interval((x + 3) // 4, {var_key(x): (np.array([0, 8]), np.array([3, 11]))})]
[[0, 2], [1, 3]]
"""

from __future__ import annotations

import numpy as np
from tvm import ir, tirx

# A bound standing for "unbounded"; boxes are clamped to the buffer afterwards.
BIG = 1 << 40


class Unsupported(Exception):
    """An expression the evaluator does not handle."""


def var_key(var) -> int:
    return var.__chandle__()


def _trunc_div(a, b):
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
    return q + fix


def _trunc_mod(a, b):
    return a - _trunc_div(a, b) * b


_BINARY = {
    tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply,
    tirx.FloorDiv: np.floor_divide, tirx.FloorMod: np.remainder,
    tirx.Div: _trunc_div, tirx.Mod: _trunc_mod, tirx.Min: np.minimum, tirx.Max: np.maximum,
    tirx.LT: np.less, tirx.LE: np.less_equal, tirx.GT: np.greater, tirx.GE: np.greater_equal,
    tirx.EQ: np.equal, tirx.NE: np.not_equal, tirx.And: np.logical_and, tirx.Or: np.logical_or,
}


def _bound(var, env: dict):
    """The value (points) or range (interval) `env` gives a variable."""
    try:
        return env[var_key(var)]
    except KeyError:
        raise Unsupported(f"free variable {var}") from None


def points(expr, env: dict):
    """The value of `expr` at every point of `env` (numpy broadcasting)."""
    t = type(expr)
    if t is ir.Var:
        return _bound(expr, env)
    if t is tirx.IntImm:
        return np.int64(expr.value)
    op = _BINARY.get(t)
    if op is not None:
        return op(points(expr.a, env), points(expr.b, env))
    if t is tirx.Not:
        return np.logical_not(points(expr.a, env))
    if t is tirx.Cast:
        return points(expr.value, env)
    if t is tirx.Select:
        return np.where(points(expr.condition, env), points(expr.true_value, env),
                        points(expr.false_value, env))
    if t is ir.Call and expr.op.name == "prim.if_then_else":
        a = expr.args
        return np.where(points(a[0], env), points(a[1], env), points(a[2], env))
    if t is ir.Call and expr.op.name == "prim.likely":
        return points(expr.args[0], env)
    raise Unsupported(f"{t.__name__} in an index expression")


def interval(expr, env: dict):
    """(lo, hi), inclusive, of `expr` over the intervals of `env`: interval arithmetic,
    the rules of tvm.sym's IntervalSet evaluation with the block variables as points."""
    t = type(expr)
    if t is ir.Var:
        return _bound(expr, env)
    if t is tirx.IntImm:
        v = np.int64(expr.value)
        return v, v
    if t is tirx.Cast:
        return interval(expr.value, env)
    if t is tirx.Add:
        (a0, a1), (b0, b1) = interval(expr.a, env), interval(expr.b, env)
        return a0 + b0, a1 + b1
    if t is tirx.Sub:
        (a0, a1), (b0, b1) = interval(expr.a, env), interval(expr.b, env)
        return a0 - b1, a1 - b0
    if t is tirx.Mul:
        (a0, a1), (b0, b1) = interval(expr.a, env), interval(expr.b, env)
        c = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        return np.minimum.reduce(np.broadcast_arrays(*c)), np.maximum.reduce(np.broadcast_arrays(*c))
    if t in (tirx.FloorDiv, tirx.Div):
        (a0, a1), (b0, b1) = interval(expr.a, env), interval(expr.b, env)
        if np.any(b0 <= 0):
            if t is tirx.Div or np.any(b1 >= 0):
                return _unbounded(a0)
        return np.minimum(a0 // b0, a0 // b1), np.maximum(a1 // b0, a1 // b1)
    if t is tirx.FloorMod:
        (a0, a1), (b0, b1) = interval(expr.a, env), interval(expr.b, env)
        if not (np.ndim(b0) == 0 and b0 == b1 and b0 > 0):
            if np.all(b0 > 0):
                return np.zeros_like(a0), np.broadcast_to(b1 - 1, np.shape(a0))
            return _unbounded(a0)
        same = (a0 // b0) == (a1 // b0)
        return np.where(same, a0 % b0, 0), np.where(same, a1 % b0, b0 - 1)
    if t is tirx.Min:
        (a0, a1), (b0, b1) = interval(expr.a, env), interval(expr.b, env)
        return np.minimum(a0, b0), np.minimum(a1, b1)
    if t is tirx.Max:
        (a0, a1), (b0, b1) = interval(expr.a, env), interval(expr.b, env)
        return np.maximum(a0, b0), np.maximum(a1, b1)
    if t is tirx.Select or (t is ir.Call and expr.op.name == "prim.if_then_else"):
        a, b = (expr.true_value, expr.false_value) if t is tirx.Select else expr.args[1:]
        (a0, a1), (b0, b1) = interval(a, env), interval(b, env)
        return np.minimum(a0, b0), np.maximum(a1, b1)
    raise Unsupported(f"{t.__name__} in an index expression")


def _unbounded(like):
    shape = np.shape(like)
    return np.full(shape, -BIG, dtype=np.int64), np.full(shape, BIG, dtype=np.int64)


def linear_form(expr, forms: dict, relaxed: set[int]):
    """{var_key: coefficient} of `expr` over the relaxed variables, or None when `expr` is
    not affine in them. Parts without relaxed variables (block-index math) are free.
    `forms` maps iterator variables to their own linear forms (block bindings).

    >>> from tvm import tirx
    >>> x, b = tirx.Var("x", "int64"), tirx.Var("b", "int64")
    >>> list(linear_form(b // 3 * 8 + x * 2, {}, {var_key(x)}).values())
    [2]
    """
    t = type(expr)
    if t is ir.Var:
        k = var_key(expr)
        if k in forms:
            return forms[k]
        return {k: 1} if k in relaxed else {}
    if t is tirx.IntImm:
        return {}
    if t is tirx.Cast:
        return linear_form(expr.value, forms, relaxed)
    if t in (tirx.Add, tirx.Sub):
        a, b = linear_form(expr.a, forms, relaxed), linear_form(expr.b, forms, relaxed)
        if a is None or b is None:
            return None
        sign = 1 if t is tirx.Add else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v != 0}
    if t is tirx.Mul:
        a, b = linear_form(expr.a, forms, relaxed), linear_form(expr.b, forms, relaxed)
        if a is None or b is None:
            return None
        if a and b:
            return None
        lin, other = (a, expr.b) if a else (b, expr.a)
        if not lin:
            return {}
        if type(other) is not tirx.IntImm:
            return None
        return {k: v * other.value for k, v in lin.items()}
    # Anything else is affine only when no relaxed variable is inside.
    inner = [linear_form(c, forms, relaxed) for c in _children(expr)]
    if any(f is None or f for f in inner):
        return None
    return {}


def _children(expr):
    t = type(expr)
    if t in _BINARY:
        return (expr.a, expr.b)
    if t is tirx.Not:
        return (expr.a,)
    if t is tirx.Select:
        return (expr.condition, expr.true_value, expr.false_value)
    if t is ir.Call:
        return tuple(expr.args)
    raise Unsupported(f"{t.__name__} in an index expression")
