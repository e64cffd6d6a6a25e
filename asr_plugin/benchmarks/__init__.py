"""Benchmark and profiling code behind ``scripts/benchmark_*.py`` and ``scripts/profile_*.py`` (the scripts are thin
command lines over it, and the tests import it from here). Beside evaluation and export: it may use any layer below
(losses, models); nothing in the library imports it."""
