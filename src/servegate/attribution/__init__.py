"""Why a change moved: kernel (op) time per forward by family, from sglang's own profiler
(docs/serve.md, Profiled blocks). ``families.py`` the rules, ``trace.py`` the reduction of a
trace, ``record.py`` run.json's ``profile``, ``ratios.py`` the comparison between modes or trees:
reported beside the gated checks, never gating.
"""
