"""The environment variable the edge reads for each ``EngineOptions`` field: one table for
the CLI (click's ``envvar=`` bindings, mounted without importing the models package) and
``EngineOptions.from_env`` (the API's edge)."""

__all__ = ["ENGINE_ENV"]

ENGINE_ENV: dict[str, str] = {
    "parallel": "TRACELESS_LLAMACPP_PARALLEL",
    "prompt_cache": "TRACELESS_LLAMACPP_PROMPT_CACHE",
    "threads": "TRACELESS_NUM_THREADS",
    "timeout": "TRACELESS_LLAMACPP_TIMEOUT",
    "context": "TRACELESS_LLAMACPP_CONTEXT",
    "speculation": "TRACELESS_SPECULATION",
}
"""Field of ``EngineOptions`` → the variable that sets it."""
