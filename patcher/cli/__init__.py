"""The command line: ``main`` parses the arguments and dispatches; ``doctor_cli``,
``drafter_cli`` and ``port_cli`` add their subcommands; ``report`` turns reports into text and
JSON. The only folder that prints or exits.

May import: errors, findings, program, engine_specs, environment, core, probes, installer, release, drafter, doctor,
maintainer.
"""
