"""Running built modules: measurement (measure), verification (verify), GPU kernels on the CPU (emulation)."""
