"""The workbench TUI (Textual): operator graph, block dependencies, fusion decisions, timing.

Views are written against workbench.tui.facts; engine_adapter is the only module that
touches engine.blockdeps and engine.parallel; the app drives engine.session.Session.
"""
