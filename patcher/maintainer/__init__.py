"""Maintainer tooling: published wheels as source trees, CPU import environments, porting.

Never imported by ``apply``/``verify``/``revert``: these modules reach the network (pip) and
build virtualenvs. The installer stays importable with nothing but its declared dependencies.

May import: errors, findings, program, engine_specs, environment, core, probes, installer, release, drafter, doctor.
"""
