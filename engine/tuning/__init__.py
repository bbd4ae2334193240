"""Tuning: MetaSchedule per kernel with a persistent database (tuner, database), co-tuning of
fused parallel groups (cotune, cotune_plan), the schedule stage's entry point (hook),
distributed (RPC) and offline measurement (measure, offline).

The options (`TuneOptions`, `RpcEndpoint`) are plain data and load without TVM; the other
names load MetaSchedule on first access.
"""

import importlib

from engine.tuning.options import MIN_TRIALS_PER_KERNEL, RpcEndpoint, TuneOptions

_LAZY = {"Choice": "database", "KernelRecord": "database", "TuneStore": "database",
         "TuneReport": "tuner", "tune_module": "tuner"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"engine.tuning.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'engine.tuning' has no attribute '{name}'")


__all__ = ["MIN_TRIALS_PER_KERNEL", "RpcEndpoint", "TuneOptions", *_LAZY]
