"""blockwise workbench: the command line and the Textual UI over `engine.session.Session`."""
