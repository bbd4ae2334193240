"""Engine facts as text lines, table rows and JSON: the one presentation layer the CLI
and the TUI both use (no UI library here).

    plan       the fusion plan: `workbench plan` lines, the TUI's decision rows
    fusion     what the apply-plan stage did: report JSON, lines, the TUI's results
    blockdeps  block dependencies: `workbench blockdeps` lines and JSON, the TUI's figures
    report     the compile report: report.json and the lines `workbench compile` prints
    opgraph    the operator graph: unique op labels, a node's properties, graph inputs/outputs
    glossary   the terms the TUI uses (block per target, edge classes, decision kinds)

Import the module you need; this package imports none of them.
"""
