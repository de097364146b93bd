"""What an installed release is, read from its files: ``release`` (one description of an engine
release: name, version, site, every family's state), ``launch_command`` (a server command read as
the engine's own parser reads it, ``release_parser`` running that parser in the engine's
interpreter).

May import: errors, findings, program, engine_specs, environment, core.
"""
