"""ONNX LSTM, GRU and RNN as Relax operators, unrolled over the static sequence length.

TVM 0.27's ONNX frontend has none of the three. Each direction becomes
  - the input projections of all time steps, hoisted out of the recurrence: per gate one
    matmul X·W_g^T (+ the gate's biases) over [seq, batch, input]. The gates of a cell are
    then independent operators reading X, which engine.parallel proposes as a group;
  - per time step one matmul h·R^T for all gates, then the cell's elementwise update.
Shorter `sequence_lens` are masked: past a sequence's end its state is held and its Y is
zero; the reverse direction first reverses each sequence within its own length (a
gather), runs forward, and reverses Y back.

A converter has engine.relax_import's fix signature, `(inputs, attrs) -> Expr`, and
emits its bindings into the current BlockBuilder: every binding it emits feeds one of the
node's outputs, so the binding -> operator link (engine.relax_import) gives them all to
the node. Constant weights are sliced and transposed here, in numpy, rather than as Relax
ops that constant folding would have to compile and run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import tvm
from tvm import relax
from tvm.ir import Constant
from tvm.relax import op as R


@dataclass(frozen=True)
class _Kind:
    op: str
    gates: int  # gate blocks of W, R and B, in ONNX's order
    activations: tuple[str, ...]  # default activations of one direction
    states: int  # 1: h; 2: h and c


LSTM = _Kind("LSTM", 4, ("Sigmoid", "Tanh", "Tanh"), 2)  # gates i, o, f, c
GRU = _Kind("GRU", 3, ("Sigmoid", "Tanh"), 1)  # gates z, r, h
RNN = _Kind("RNN", 1, ("Tanh",), 1)

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}
# Activation name -> the alphas and betas it takes, with the defaults used when
# activation_alpha/beta run out. onnxruntime's defaults (what compiles are verified
# against): ThresholdedRelu's is 0 there, not the operator's 1.0; Affine and ScaledTanh 0.
_ACTIVATION_PARAMS = {
    "Relu": ((), ()), "Tanh": ((), ()), "Sigmoid": ((), ()), "Softsign": ((), ()), "Softplus": ((), ()),
    "LeakyRelu": ((0.01,), ()), "ThresholdedRelu": ((0.0,), ()), "Elu": ((1.0,), ()),
    "HardSigmoid": ((0.2,), (0.5,)), "Affine": ((0.0,), (0.0,)), "ScaledTanh": ((0.0,), (0.0,)),
}

Act = Callable[[relax.Expr], relax.Expr]


class _Emitter:
    """Emits into the current BlockBuilder; constants in the node's dtype."""

    def __init__(self, dtype: str):
        self.bb = relax.BlockBuilder.current()
        self.dtype = dtype

    def __call__(self, expr: relax.Expr) -> relax.Expr:
        return self.bb.emit(expr)

    def const(self, value) -> Constant:
        return relax.const(np.asarray(value, dtype=self.dtype))

    def add(self, a, b):
        return b if a is None else a if b is None else self(R.add(a, b))

    def mul(self, a, b):
        return self(R.multiply(a, b))


def _numpy(expr) -> np.ndarray | None:
    return expr.value.numpy() if isinstance(expr, Constant) else None


def _shape(expr, what: str, node: str) -> tuple[int, ...]:
    dims = getattr(getattr(expr.ty, "shape", None), "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        raise tvm.error.OpNotImplemented(f"{node}: {what} needs a static shape, got {dims}")
    return tuple(int(d) for d in dims)


def _rows(em: _Emitter, t, d: int, lo: int, hi: int):
    """t[d, lo:hi] of a [D, N, ...] tensor."""
    a = _numpy(t)
    if a is not None:
        return relax.const(np.ascontiguousarray(a[d, lo:hi]))
    rest = tuple(int(v) for v in t.ty.shape.values[2:])
    return em(R.reshape(R.strided_slice(t, axes=[0, 1], begin=[d, lo], end=[d + 1, hi]), (hi - lo, *rest)))


def _optional_rows(em: _Emitter, t, d: int, lo: int, hi: int):
    """_rows of an optional input (bias, peepholes, initial state); None when absent or a constant zero."""
    if t is None or (_numpy(t) is not None and not _numpy(t)[d, lo:hi].any()):
        return None
    return _rows(em, t, d, lo, hi)


def _transposed(em: _Emitter, m):
    a = _numpy(m)
    return relax.const(np.ascontiguousarray(a.T)) if a is not None else em(R.permute_dims(m))


def _direction_major(em: _Emitter, s):
    """A [batch, dirs, H] state (layout 1) as [dirs, batch, H]."""
    if s is None:
        return None
    a = _numpy(s)
    if a is not None:
        return relax.const(np.ascontiguousarray(a.transpose(1, 0, 2)))
    return em(R.permute_dims(s, [1, 0, 2]))


def _activations(kind: _Kind, attrs: dict, directions: int, node: str) -> list[list[Act]]:
    """Per direction, the cell's activation functions, with their alphas and betas taken in order."""
    names = [n.decode() if isinstance(n, bytes) else n for n in attrs.get("activations", ())]
    names = names or list(kind.activations) * directions
    if len(names) != len(kind.activations) * directions:
        raise tvm.error.OpNotImplemented(
            f"{node}: {len(names)} activations given, {kind.op} takes {len(kind.activations)} per direction")
    alphas, betas = list(attrs.get("activation_alpha", ())), list(attrs.get("activation_beta", ()))
    acts = []
    canonical = {n.lower(): n for n in _ACTIVATION_PARAMS}  # onnxruntime ignores case too
    for given in names:
        name = canonical.get(given.lower())
        if name is None:
            raise tvm.error.OpNotImplemented(f"{node}: activation {given} is not supported")
        need_a, need_b = _ACTIVATION_PARAMS[name]
        a = [alphas.pop(0) if alphas else default for default in need_a]
        b = [betas.pop(0) if betas else default for default in need_b]
        acts.append((name, a, b))
    per = len(kind.activations)
    return [acts[i * per:(i + 1) * per] for i in range(directions)]


def _activation(em: _Emitter, name: str, alpha: list, beta: list) -> Act:
    c = em.const
    table: dict[str, Act] = {
        "Sigmoid": lambda x: em(R.sigmoid(x)),
        "Tanh": lambda x: em(R.tanh(x)),
        "Relu": lambda x: em(R.nn.relu(x)),
        "LeakyRelu": lambda x: em(R.nn.leakyrelu(x, alpha[0])),
        "ThresholdedRelu": lambda x: em(R.where(R.greater(x, c(alpha[0])), x, c(0))),
        "Elu": lambda x: em(R.where(R.greater(x, c(0)), x, R.multiply(c(alpha[0]), R.subtract(R.exp(x), c(1))))),
        "HardSigmoid": lambda x: em(R.clip(R.add(R.multiply(x, c(alpha[0])), c(beta[0])), 0.0, 1.0)),
        "Affine": lambda x: em(R.add(R.multiply(x, c(alpha[0])), c(beta[0]))),
        "ScaledTanh": lambda x: em(R.multiply(c(alpha[0]), R.tanh(R.multiply(x, c(beta[0]))))),
        "Softsign": lambda x: em(R.divide(x, R.add(R.abs(x), c(1)))),
        "Softplus": lambda x: em(R.log(R.add(R.exp(x), c(1)))),
    }
    return table[name]


@dataclass
class _Direction:
    """One direction's weights, ready for the unrolled loop (None: absent or zero)."""

    w_t: dict  # per gate read, W_g^T [I, H]
    x_bias: dict  # per gate read, the biases added to the hoisted projection
    r_t: relax.Expr  # R^T [H, rec_gates * H]: the gates whose recurrent term is h R_g^T
    rec_gates: int  # all gates but GRU's h gate when linear_before_reset=0
    rh_t: relax.Expr | None  # GRU, linear_before_reset=0: Rh^T, applied to r * h
    rh_bias: relax.Expr | None  # GRU, linear_before_reset=1: Rbh, added inside r * (h Rh^T + Rbh)
    peep: list  # LSTM: P_i, P_o, P_f (P_f None with input_forget)
    h0: relax.Expr | None
    c0: relax.Expr | None
    acts: list[Act]


@dataclass(frozen=True)
class _Options:
    """The node's attributes that change the cell's arithmetic."""

    clip: float | None  # bound on every activation's input
    linear_before_reset: bool  # GRU: r * (h Rh^T + Rbh) instead of (r * h) Rh^T + Rbh
    input_forget: bool  # LSTM: the forget gate is 1 - the input gate


def _convert(kind: _Kind, inputs, attrs: dict) -> relax.Expr:
    node = f"{kind.op} node '{attrs.get('tvm_custom', {}).get('name', '')}'"
    x, w, r, bias, lens, h0 = (inputs[k] for k in range(6))
    c0, peep = (inputs[6], inputs[7]) if kind is LSTM else (None, None)
    direction = attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in _DIRECTIONS:
        raise tvm.error.OpNotImplemented(f"{node}: unknown direction '{direction}'")
    reverse_of = _DIRECTIONS[direction]
    layout = int(attrs.get("layout", 0))
    em = _Emitter(str(x.ty.dtype))
    if layout:  # [batch, seq, ...] -> [seq, batch, ...]
        x, h0, c0 = em(R.permute_dims(x, [1, 0, 2])), _direction_major(em, h0), _direction_major(em, c0)
    xshape, wshape, rshape = _shape(x, "X", node), _shape(w, "W", node), _shape(r, "R", node)
    steps, batch, _ = xshape
    hidden = int(attrs.get("hidden_size", rshape[-1]))
    if rshape[1:] != (kind.gates * hidden, hidden) or wshape[1] != kind.gates * hidden:
        raise tvm.error.OpNotImplemented(f"{node}: W {wshape} and R {rshape} do not fit hidden_size {hidden}")
    acts = _activations(kind, attrs, len(reverse_of), node)
    opts = _Options(attrs.get("clip"), bool(attrs.get("linear_before_reset", 0)),
                    kind is LSTM and bool(attrs.get("input_forget", 0)))

    lens_np = _numpy(lens) if lens is not None else None
    masked = lens is not None and not (lens_np is not None and (lens_np == steps).all())
    valid = order = None
    if masked:
        t_index = relax.const(np.arange(steps).reshape(steps, 1), "int64")
        lens64 = em(R.reshape(R.astype(lens, "int64"), (1, batch)))
        valid = em(R.less(t_index, lens64))  # [T, B]
        if any(reverse_of):  # each sequence reversed within its length, the steps past it in place: an involution
            order = em(R.where(valid, R.subtract(R.subtract(lens64, relax.const(1, "int64")), t_index), t_index))
            order = em(R.expand_dims(order, 2))
        valid = em(R.expand_dims(valid, 2))  # [T, B, 1]

    ys, hs, cs = [], [], []
    for d, rev in enumerate(reverse_of):
        dw = _weights(em, kind, w, r, bias, h0, c0, peep, d, hidden, batch, opts,
                      [_activation(em, *a) for a in acts[d]])
        xs = em(R.gather_elements(x, em(R.broadcast_to(order, xshape)), 0)) if masked and rev else x
        y, h, c = _unroll(em, kind, xs, dw, steps, hidden, opts, rev and not masked, valid)
        if masked and rev:
            y = em(R.gather_elements(y, em(R.broadcast_to(order, (steps, batch, hidden))), 0))
        ys.append(y)
        hs.append(h)
        cs.append(c)
    outs = [em(R.stack(ys, axis=1)), em(R.stack(hs, axis=0))]  # Y [T, D, B, H], Y_h [D, B, H]
    if kind.states == 2:
        outs.append(em(R.stack(cs, axis=0)))
    if layout:  # Y [B, T, D, H], states [B, D, H]
        outs = [em(R.permute_dims(outs[0], [2, 0, 1, 3]))] + [em(R.permute_dims(s, [1, 0, 2])) for s in outs[1:]]
    return relax.Tuple(outs)


def _weights(em: _Emitter, kind: _Kind, w, r, bias, h0, c0, peep, d: int, hidden: int, batch: int,
             opts: _Options, acts: list[Act]) -> _Direction:
    """Direction d's weights; nothing for a gate no step reads (a dead binding reading W
    would have no operator)."""
    H, G, lbr = hidden, kind.gates, opts.linear_before_reset
    gru_h = 2 if kind is GRU else -1  # GRU's h gate: its recurrent bias and term are special
    read = [g for g in range(G) if not (opts.input_forget and g == 2)]  # LSTM's f gate: 1 - i
    w_t = {g: _transposed(em, _rows(em, w, d, g * H, (g + 1) * H)) for g in read}
    wb = {g: _optional_rows(em, bias, d, g * H, (g + 1) * H) for g in read}
    rb = {g: _optional_rows(em, bias, d, (G + g) * H, (G + g + 1) * H) for g in read}
    x_bias = {g: wb[g] if lbr and g == gru_h else _sum(em, wb[g], rb[g]) for g in read}
    rec_gates = 2 if kind is GRU and not lbr else G
    rh_t = _transposed(em, _rows(em, r, d, 2 * H, 3 * H)) if rec_gates < G else None
    peeps = [_optional_rows(em, peep, d, k * H, (k + 1) * H) if k in (0, 1) or 2 in read else None
             for k in range(3)] if kind is LSTM else []
    return _Direction(w_t, x_bias, _transposed(em, _rows(em, r, d, 0, rec_gates * H)), rec_gates, rh_t,
                      rb[gru_h] if kind is GRU and lbr else None, peeps,
                      _optional_rows(em, h0, d, 0, batch), _optional_rows(em, c0, d, 0, batch), acts)


def _sum(em: _Emitter, a, b):
    if isinstance(a, Constant) and isinstance(b, Constant):
        return relax.const(_numpy(a) + _numpy(b))
    return em.add(a, b)


def _unroll(em: _Emitter, kind: _Kind, x, dw: _Direction, steps: int, hidden: int, opts: _Options,
            reversed_steps: bool, valid) -> tuple:
    """(Y [T, B, H], last h, last c) of one direction; `valid` [T, B, 1]: the step is within
    the sequence (None: every step is)."""
    H = hidden
    # hoisted out of the recurrence: X W_g^T + biases for all steps, [T, B, H] per gate
    proj = {g: em.add(em(R.matmul(x, w_t)), dw.x_bias[g]) for g, w_t in dw.w_t.items()}
    h, c = dw.h0, dw.c0
    zero = em.const(0)
    ys: dict[int, relax.Expr] = {}
    for t in (reversed(range(steps)) if reversed_steps else range(steps)):
        both = em(R.matmul(h, dw.r_t)) if h is not None else None  # h R^T for all gates at once
        xt = _Lazy(lambda g, t=t: _at(em, proj[g], t))
        rec = _Lazy(lambda g, both=both: None if both is None or g >= dw.rec_gates else
                    em(R.strided_slice(both, axes=[1], begin=[g * H], end=[(g + 1) * H])))
        h_new, c_new = _CELLS[kind.op](em, dw, xt, rec, h, c, opts)
        if valid is None:
            ys[t], h, c = h_new, h_new, c_new
            continue
        keep = _at(em, valid, t)  # [B, 1]
        ys[t] = em(R.where(keep, h_new, zero))
        h = em(R.where(keep, h_new, h if h is not None else zero))
        if c_new is not None:
            c = em(R.where(keep, c_new, c if c is not None else zero))
    return em(R.stack([ys[t] for t in range(steps)], axis=0)), h, c


class _Lazy:
    """Per-gate values made on first use: a slice no gate reads would be a dead binding
    (which the binding -> operator link would give to whatever it reads)."""

    def __init__(self, make: Callable[[int], relax.Expr | None]):
        self.make, self.done = make, {}

    def __getitem__(self, g: int):
        if g not in self.done:
            self.done[g] = self.make(g)
        return self.done[g]


def _at(em: _Emitter, v, t: int):
    """v[t] of a [T, ...] tensor: a slice and a reshape (both fuse into the step's kernels;
    `take` with a constant index reads it from memory and stays a kernel of its own)."""
    rest = [int(d) for d in v.ty.shape.values[1:]]
    return em(R.reshape(R.strided_slice(v, axes=[0], begin=[t], end=[t + 1]), rest))


def _clip(em: _Emitter, v, opts: _Options):
    return v if opts.clip is None else em(R.clip(v, -float(opts.clip), float(opts.clip)))


def _lstm_cell(em, dw, xt, rec, h, c, opts):
    f, g, hact = dw.acts
    p_i, p_o, p_f = dw.peep

    def pre(k: int, peephole=None, state=None):  # gate k's input to its activation
        v = em.add(xt[k], rec[k])
        return _clip(em, em.add(v, em.mul(peephole, state)) if peephole is not None and state is not None else v,
                     opts)

    i, cc = f(pre(0, p_i, c)), g(pre(3))
    c_new = em.mul(i, cc)
    if c is not None:  # with a zero cell state the forget gate does not matter
        forget = em(R.subtract(em.const(1), i)) if opts.input_forget else f(pre(2, p_f, c))
        c_new = em.add(em.mul(forget, c), c_new)
    o = f(pre(1, p_o, c_new))
    return em.mul(o, hact(c_new)), c_new


def _gru_cell(em, dw, xt, rec, h, c, opts):
    f, g = dw.acts
    z, r = f(_clip(em, em.add(xt[0], rec[0]), opts)), f(_clip(em, em.add(xt[1], rec[1]), opts))
    if opts.linear_before_reset:  # r * (h Rh^T + Rbh)
        inner = em.add(rec[2], dw.rh_bias)
        hh = em.add(xt[2], em.mul(r, inner) if inner is not None else None)
    else:  # (r * h) Rh^T
        hh = em.add(xt[2], em(R.matmul(em.mul(r, h), dw.rh_t)) if h is not None else None)
    hh = g(_clip(em, hh, opts))
    keep_new = em.mul(em(R.subtract(em.const(1), z)), hh)
    return em.add(keep_new, em.mul(z, h) if h is not None else None), None


def _rnn_cell(em, dw, xt, rec, h, c, opts):
    (f,) = dw.acts
    return f(_clip(em, em.add(xt[0], rec[0]), opts)), None


_CELLS = {"LSTM": _lstm_cell, "GRU": _gru_cell, "RNN": _rnn_cell}


def convert_lstm(inputs, attrs) -> relax.Expr:
    return _convert(LSTM, inputs, attrs)


def convert_gru(inputs, attrs) -> relax.Expr:
    return _convert(GRU, inputs, attrs)


def convert_rnn(inputs, attrs) -> relax.Expr:
    return _convert(RNN, inputs, attrs)


RECURRENT = {"LSTM": convert_lstm, "GRU": convert_gru, "RNN": convert_rnn}
