"""inspect_ai tasks (``pip install 'traceless[inspect]'``), registered through inspect's
``inspect_ai`` entry point: ``inspect eval traceless/canary_audit`` and
``inspect eval traceless/afterdelete``. See docs/inspect.md."""

from inspect_ai._util.registry import registry_add, registry_info

from traceless._inspect._afterdelete import afterdelete
from traceless._inspect._canary import canary_audit

__all__ = ["afterdelete", "canary_audit"]


def _namespace_tasks() -> None:
    """inspect names a task ``PACKAGE/NAME`` only when it finds the package installed (in
    site-packages, or editable with PEP 610 metadata). Imported from a checkout on
    PYTHONPATH whose ``src/traceless.egg-info`` shadows the install, it registers the bare
    name and ``inspect eval traceless/canary_audit`` would find nothing: register the
    namespaced name then too."""
    for t in (canary_audit, afterdelete):
        info = registry_info(t)
        if "/" not in info.name:
            registry_add(t, info.model_copy(update={"name": f"traceless/{info.name}"}))


_namespace_tasks()
