"""ONNX operators converted by us instead of TVM's Relax frontend (missing there, wrong, or
converted in a form our stages cannot fuse). Each module owns a dict op_type -> converter
`(inputs, attrs) -> relax.Expr`; `CONVERTERS` merges them."""

from engine.converters.constant import CONSTANT
from engine.converters.conv_transpose import CONV_TRANSPOSE
from engine.converters.cumulative import CUMULATIVE
from engine.converters.dropout import DROPOUT
from engine.converters.elementwise import ELEMENTWISE
from engine.converters.expand import EXPAND
from engine.converters.extrema import EXTREMA
from engine.converters.layer_norm import LAYER_NORM
from engine.converters.losses import LOSSES
from engine.converters.lrn import LRN
from engine.converters.nms import NMS
from engine.converters.normalization import NORMALIZATION
from engine.converters.power import POWER
from engine.converters.reshape import RESHAPE
from engine.converters.rnn import RECURRENT
from engine.converters.sequence_insert import SEQUENCE_INSERT
from engine.converters.sequence_reverse import SEQUENCE_REVERSE
from engine.converters.variadic import VARIADIC

CONVERTERS = {**VARIADIC, **RECURRENT, **ELEMENTWISE, **CUMULATIVE, **NORMALIZATION, **SEQUENCE_REVERSE,
              **LOSSES, **CONSTANT, **EXPAND, **EXTREMA, **RESHAPE, **POWER,
              **LAYER_NORM, **DROPOUT, **NMS, **LRN, **CONV_TRANSPOSE, **SEQUENCE_INSERT}
