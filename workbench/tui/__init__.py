"""The workbench TUI (Textual): operator graph, block dependencies, fusion decisions, timing.

Views are written against workbench.tui.facts (and the plan's DecisionStatus); engine_adapter
is the only module that asks the engine for analyses, and it words them with
workbench.present; the app drives engine.session.Session.
"""
