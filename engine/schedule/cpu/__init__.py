"""Default llvm schedules: rule selection (rules), conv and row-wise rules, shared helpers (common)."""
