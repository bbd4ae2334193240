"""Batch-norm calibration for models whose weights were replaced by random ones.

With random weights, batch-norm statistics no longer match the activations they see:
deep nets (resnet50, inception_v2) then blow up and their softmax saturates to one-hot,
hiding numerical errors. Setting each BatchNormalization's mean/variance to the statistics
of a random input, as training would, keeps every activation O(1).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def calibrate_batchnorm(proto: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> int:
    """Set BN running stats to the batch statistics of `inputs`; returns how many were set.

    One forward pass suffices: in a probe copy every BN becomes InstanceNormalization,
    which with batch 1 normalises with exactly the statistics we are about to store, so
    every BN input is computed with its upstream already calibrated."""
    from engine.cores import cpu_threads
    from engine.runtime.measure import onnxruntime_session

    inits = {i.name: i for i in proto.graph.initializer}
    shapes = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in proto.graph.value_info}
    bns = [n for n in proto.graph.node if n.op_type == "BatchNormalization"
           and n.input[3] in inits and n.input[4] in inits and shapes.get(n.input[0], 4) >= 3]
    batch_one = all(vi.type.tensor_type.shape.dim[0].dim_value == 1
                    for vi in proto.graph.input if vi.type.tensor_type.shape.dim)
    if not bns or not batch_one:  # InstanceNormalization equals BN's statistics only at batch 1
        return 0
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    wanted = {n.output[0] for n in bns}
    for node in probe.graph.node:
        if node.op_type == "BatchNormalization" and node.output[0] in wanted:
            eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
            node.CopyFrom(helper.make_node("InstanceNormalization", list(node.input[:3]),
                                           [node.output[0]], name=node.name, epsilon=eps))
    del probe.graph.output[:]
    probe.graph.output.extend(helper.make_empty_tensor_value_info(n.input[0]) for n in bns)
    sess = onnxruntime_session(probe.SerializeToString(), threads=cpu_threads())
    for n, x in zip(bns, sess.run(None, inputs)):
        eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
        axes = tuple(i for i in range(x.ndim) if i != 1)
        x = x.astype(np.float64)
        for slot, value in ((3, x.mean(axis=axes)), (4, x.var(axis=axes) + 1e-5 - eps)):
            old = inits[n.input[slot]]
            old.CopyFrom(numpy_helper.from_array(value.astype(np.float32).reshape(tuple(old.dims)), old.name))
    return len(bns)

