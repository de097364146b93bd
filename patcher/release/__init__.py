"""What an installed release does, read from its files: ``release`` (one description of an
engine release: name, version, site, every family's state), ``launch_facts`` (runners, the
environment variables it declares, its defaults), ``launch_command`` (a server command read as the
engine's own parser reads it).

May import: errors, findings, engine_specs, environment, core.
"""
