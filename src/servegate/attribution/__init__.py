"""Why a change moved: kernel (op) time per forward by family, from sglang's own profiler.

One profiled block per mode (and tree) and server start runs under sglang's ``/start_profile``
for a bounded number of forward steps, never counted in the timing evidence
(``servegate.serve.profiler``, ``servegate.commands.bench_profile``). Its trace is reduced here
to kernel time per forward step by family (``families.py``: the one registry of rules;
``trace.py``: the reduction), kept compactly in run.json's ``profile`` (``record.py``), and
compared between modes or trees with an interval across the profiled forwards
(``ratios.py``): reported beside the gated checks, never gating.
"""
