"""measure stage: sglang's own load client per point, its JSONL, and the server-log read-back."""
