"""ONNX operators converted by us instead of TVM's Relax frontend (missing there, wrong, or
converted in a form our stages cannot fuse). Each module owns a dict op_type -> converter
`(inputs, attrs) -> relax.Expr`; `CONVERTERS` merges them."""

from engine.converters.rnn import RECURRENT
from engine.converters.variadic import VARIADIC

CONVERTERS = {**VARIADIC, **RECURRENT}
