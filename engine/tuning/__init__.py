"""Tuning: MetaSchedule per kernel with a persistent database (tuner, database), co-tuning of
fused parallel groups (cotune, cotune_plan), the schedule stage's entry point (hook),
distributed (RPC) and offline measurement (measure, offline)."""

from engine.tuning.database import Choice, KernelRecord, TuneStore
from engine.tuning.measure import RpcEndpoint
from engine.tuning.tuner import TuneOptions, TuneReport, tune_module

__all__ = ["Choice", "KernelRecord", "TuneStore", "RpcEndpoint", "TuneOptions", "TuneReport", "tune_module"]
