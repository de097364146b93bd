"""Versioned patches that make EAGLE-3 work on Kimi-K2 / K2.5 targets in vLLM and SGLang,
and let SM120 GPUs use FlashInfer's allreduce fusion; installed, verified and reverted."""

__version__ = "0.1.0"
