"""Default schedules per target: cpu/ (llvm rules), gpu (dlight)."""
