"""``servegate preflight``: prove on a CPU, before a GPU is booked, that a GPU suite can see exact
fill: the launch argv parses with the installed sglang's own server-argument parser, the
admission budget (chunk, ``max_prefill_tokens``, page, DP) lets exact fill reach the chunk, and
the load the client will send makes ``off`` and exact fill admit different batches (replayed
through sglang's real ``PrefillAdder``).

Modules, one job each: :mod:`.argv` (launch argv + sglang's parser), :mod:`.budget` (what the
scheduler's admission budget will be), :mod:`.lengths` (sglang's own length sampler),
:mod:`.arrivals` (closed-loop replay through the real adder), :mod:`.cells` (one suite x runner
cell and its status), :mod:`.report` (JSON contract, table), :mod:`.cli`.
"""
