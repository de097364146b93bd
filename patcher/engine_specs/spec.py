"""What one engine's description holds (``patcher.engine_specs``): plain frozen data."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CpuEnvLine:
    """A run of releases that import in one CPU venv built from ``cpu_envs/<name>.txt``."""

    first: str
    last: str | None  # None: open-ended (and a post-release of ``last`` is still in the line)
    name: str


@dataclass(frozen=True)
class Launch:
    """How a server of the engine is started and how its parser spells the options doctor reads."""

    modules: tuple[str, ...]  # ``python -m <module>`` starts the server
    cli_module: str | None  # ``python -m <cli_module> serve`` is the console script's ``serve``
    serve_takes_model: bool  # ``<engine> serve MODEL``: a positional model tag
    dashes_or_underscores: bool  # the parser takes ``--a_b`` for ``--a-b`` (vLLM's FlexibleArgumentParser)
    spellings: dict[str, tuple[str, ...]]  # option -> every spelling the parser takes
    eagle3_flags: str  # the launch flags that run an EAGLE-3 drafter, as a user writes them


@dataclass(frozen=True)
class EngineSpec:
    name: str  # the distribution, its import package and patches/<name>/
    first_covered: str  # the first release the compatibility matrix reasons about
    cpu_env_lines: tuple[CpuEnvLine, ...]
    # import-only shims of cpu_envs/sitecustomize.py: (shim, the first release that no longer
    # needs it; None: every release does)
    cpu_shims: tuple[tuple[str, str | None], ...]
    launch: Launch
    # where a release declares the environment variables it reads, relative to site-packages, and
    # how: "getenv" (os.getenv("NAME", default) calls) or "environ" (SGLang's EnvField class)
    env_declarations: tuple[str, str]
    # the first release whose model registry resolves each architecture the drafter check names
    registered_since: dict[str, str] = field(default_factory=dict)
