"""blockwise engine: ONNX model -> operator graph -> kernels -> block dependencies -> fusion plan.

Never imports workbench, textual, rich or matplotlib: the TUI and the CLI both drive
`engine.session.Session`.
"""
