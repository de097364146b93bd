"""Import-time probes: run in a fresh interpreter of the engine's environment, they import the
patched modules and check their behaviour (``probes`` runs them, ``probe_child`` is the script
that runs there, ``import_cost`` measures a bare import to compare with).

May import: errors, findings, program, engine_specs, environment, core.
"""
