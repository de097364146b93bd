"""``doctor``'s judgement of one server command, all of it here: which engine the command starts
(``which_engine``), the install verified, the line's flags and environment checked against the
release (``command_checks``, ``config_file``, ``reading_checks``, and the engine's own launch
checks), which unready families this launch meets (``meets``), the drafter checked; one verdict,
returned as a report (``verdict``).

May import: errors, findings, program, engine_specs, environment, core, probes, installer, release, drafter.
"""
