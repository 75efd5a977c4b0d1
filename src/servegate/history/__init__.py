"""Nightly history (issue 12): every accepted run kept, change points found, baselines learned.

One module per job: :mod:`.store` (the on-disk contract), :mod:`.changepoints` (ruptures PELT on
log-values), :mod:`.noise` (repeats for a floor), :mod:`.report` (``history report``),
:mod:`.plots`, :mod:`.rolling` (``history:N`` baselines) and :mod:`.cli`.
"""
