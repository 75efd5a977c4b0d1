"""``servegate preflight``: prove on a CPU, before a GPU is booked, that a GPU suite can see exact
fill: the launch argv parses with the installed sglang's own parser, the admission budget lets
exact fill reach the chunk, and the client's load makes ``off`` and exact fill admit different
batches through sglang's real ``PrefillAdder`` (docs/serve.md, Preflight).
"""
