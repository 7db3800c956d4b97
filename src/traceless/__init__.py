"""traceless: agent memory that can prove it forgot."""

from traceless._version import __version__, code_version

__all__ = ["__version__", "code_version"]
