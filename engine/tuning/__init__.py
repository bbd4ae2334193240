"""Tuning: MetaSchedule per kernel with a persistent database, co-tuning of fused parallel
groups (cotune), distributed (RPC) and offline measurement (offline)."""

from engine.tuning.database import Choice, KernelRecord, TuneStore
from engine.tuning.measure import RpcEndpoint
from engine.tuning.tuner import KernelTuner, TuneOptions, TuneReport, tune_module

__all__ = ["Choice", "KernelRecord", "TuneStore", "RpcEndpoint", "KernelTuner", "TuneOptions",
           "TuneReport", "tune_module"]
