"""Moved to ``traceless.run`` (the run kernel); these names stay importable from here."""

from traceless.run._run_result import ManifestSummary, RunState, StudyRunResult, run_state, study_run_result

__all__ = ["ManifestSummary", "RunState", "StudyRunResult", "run_state", "study_run_result"]
