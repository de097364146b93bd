"""apply, verify, revert (``actions``): the core's plan written for one install, bytecode
invalidated, the probes run; each returns a ``Report`` (the command line prints it).

May import: errors, findings, program, engine_specs, environment, core, probes.
"""
