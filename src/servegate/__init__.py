"""servegate: benchmark and CI regression gate for SGLang serving (exact chunked-prefill fill)."""

__version__ = "0.1.0"
