"""Moved to ``traceless.run`` (the run kernel); these names stay importable from here."""

from traceless.run._ray import GenerationFile, RaySession, check_address

__all__ = ["GenerationFile", "RaySession", "check_address"]
