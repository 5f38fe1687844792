"""The OpenAI Agents SDK on reynd: `ReyndSession`, a session kept in the daemon.

Needs the `openai-agents` extra (`pip install 'reynd[openai-agents]'`); see
docs/openai-agents.md.
"""

from reynctl.openai_agents.session import ReyndSession as ReyndSession

__all__ = ["ReyndSession"]
