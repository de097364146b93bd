"""``doctor``'s judgement of one server command: the install verified, the launch's flags and
environment checked against the release (``command_checks``, and the engine's own launch checks),
the drafter checked; one verdict, returned as a report (``doctor``).

May import: errors, findings, program, engine_specs, environment, core, probes, installer, release, drafter.
"""
