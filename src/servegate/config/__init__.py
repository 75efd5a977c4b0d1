"""config stage: load and validate suites (what to run) and model profiles (how to serve)."""

from servegate.config._schema import ConfigError
from servegate.config.profiles import ModelProfile, RunnerProfile, load_profile
from servegate.config.suites import Design, Load, Suite, load_suite, suite_path

__all__ = ["ConfigError", "Design", "Load", "ModelProfile", "RunnerProfile", "Suite",
           "load_profile", "load_suite", "suite_path"]
