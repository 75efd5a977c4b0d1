"""Admission suite: replay sglang's real ``PrefillAdder`` on CPU and guard exact chunk fill."""
