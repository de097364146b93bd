"""The engine's environment, read without importing the engine: which site-packages holds it,
its RECORD (the only paths we touch), its version and the interpreter that runs it (``engines``,
``interpreter``; ``checkout``: an editable install's package and what proves its files; ``paths``:
what a RECORD path or hash may look like;
``_introspect`` is the script that interpreter runs to answer).

May import: errors, findings, program, engine_specs.
"""
