"""The agent that reads memory and answers: ``Agent(model, memory, owner=...).respond(query)``."""

from traceless.agent._agent import Agent, AgentConfig, AgentReply

__all__ = ["Agent", "AgentConfig", "AgentReply"]
