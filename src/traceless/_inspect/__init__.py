"""inspect_ai tasks (``pip install 'traceless[inspect]'``), registered through inspect's
``inspect_ai`` entry point: ``inspect eval traceless/canary_audit`` and
``inspect eval traceless/afterdelete``. See docs/inspect.md."""

from traceless._inspect._afterdelete import afterdelete
from traceless._inspect._canary import canary_audit

__all__ = ["afterdelete", "canary_audit"]
