"""The user's own LangGraph graph in the audit (``{"graph": "module:factory"}``).

The factory is imported from ``module`` (a dotted module name, or a ``.py`` file) and called
as ``factory(checkpointer=…, store=…)``, plus ``model=…`` when it takes a ``model``
parameter: a LangChain chat model that answers with the audit's model, so the reply the
audit measures is the user's agent's, on the audited model. It must return a compiled graph
whose input is ``{"messages": [...]}`` (``create_react_agent``, LangChain's
``create_agent``, any ``MessagesState`` graph).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceless.errors import ConfigError
from traceless.models import ChatMessage, GenerationConfig, ModelBackend

__all__ = ["audit_chat_model", "load_factory"]


def load_factory(spec: str) -> Callable[..., Any]:
    """``module:factory`` → the callable; a bad spec is one line that says what to give."""
    mod_name, sep, attr = spec.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ConfigError(f"langgraph: graph {spec!r} is not 'module:factory' (e.g. 'myapp.agent:build_graph' or "
                          "'path/to/agent.py:build_graph')")
    try:
        if mod_name.endswith(".py"):
            path = Path(mod_name).expanduser()
            if not path.is_file():
                raise ConfigError(f"langgraph: graph module file {path} does not exist; give an existing .py file")
            name = f"_traceless_user_graph_{path.stem}"
            mod_spec = importlib.util.spec_from_file_location(name, path)
            assert mod_spec is not None and mod_spec.loader is not None
            mod = importlib.util.module_from_spec(mod_spec)
            sys.modules[name] = mod  # pydantic models in it resolve their annotations there
            mod_spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(mod_name)
    except ConfigError:
        raise
    except Exception as e:  # the user's module: any failure is reported in one line
        raise ConfigError(f"langgraph: cannot import the graph module {mod_name!r} ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); check `graph` in the memory config") from None
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ConfigError(f"langgraph: {mod_name!r} has no callable {attr!r}; `graph` names a factory "
                          "taking checkpointer= and store= and returning a compiled graph")
    return fn  # type: ignore[no-any-return]


def build_graph(factory: Callable[..., Any], checkpointer: Any, store: Any, model: Any) -> Any:
    """Call the factory (with ``model`` only if it takes one); check it returned a graph."""
    params = inspect.signature(factory).parameters
    kwargs: dict[str, Any] = {"checkpointer": checkpointer, "store": store}
    if "model" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs["model"] = model
    try:
        graph = factory(**kwargs)
    except Exception as e:
        raise ConfigError(f"langgraph: the graph factory failed ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); it is called as "
                          "factory(checkpointer=..., store=...[, model=...])") from None
    if not (hasattr(graph, "invoke") and hasattr(graph, "get_state")):
        raise ConfigError(f"langgraph: the graph factory returned {type(graph).__name__}, not a compiled graph "
                          "(return builder.compile(checkpointer=checkpointer, store=store))")
    return graph


def audit_chat_model(model: ModelBackend, max_new_tokens: int) -> Any:
    """A LangChain chat model answering with the audit's ``model`` (greedy, no tool calls)."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    role = {"human": "user", "ai": "assistant", "system": "system", "tool": "user"}

    class AuditChatModel(BaseChatModel):
        backend: Any = None
        tokens: int = 64
        last_request: list[ChatMessage] = []
        """The chat of the last call (the probe's row stores it as the prompt the model saw)."""
        last: Any = None
        """The last call's Generation."""

        @property
        def _llm_type(self) -> str:
            return "traceless-audit"

        def bind_tools(self, tools: Any, **kwargs: Any) -> AuditChatModel:
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            msgs = [ChatMessage(role=role.get(m.type, "user"), content=str(m.content)) for m in messages]
            t0 = time.monotonic()
            g = self.backend.generate(msgs, GenerationConfig(max_new_tokens=self.tokens, temperature=0.0))
            self.last_request, self.last = msgs, g
            info = {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens,
                    "seconds": time.monotonic() - t0}
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=g.text), generation_info=info)])

    return AuditChatModel(backend=model, tokens=max_new_tokens)
