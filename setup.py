# The packages are found, not listed (issue 59): a new engine's package under patcher/engine_specs/
# is in the wheel with no line here or in pyproject.toml. The top-level patches/ ships as
# patcher.patches (package-dir in pyproject.toml), which no search under patcher/ can find.
from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["patcher", "patcher.*"]), "patcher.patches"])
