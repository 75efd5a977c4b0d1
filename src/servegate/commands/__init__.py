"""The ``servegate`` commands: the dispatcher and one module per command that is not a stage's own.

Each command module exposes ``main(argv) -> int``; :mod:`servegate.commands.dispatch` maps command
names to them (the stages' own commands, e.g. ``admission`` or ``history``, live in their packages).
"""
