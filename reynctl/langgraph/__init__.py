"""LangGraph on reynd: `ReyndSaver`, a checkpointer that keeps threads in the daemon.

Needs the `langgraph` extra (`pip install 'reynd[langgraph]'`); see docs/langgraph.md.
"""

from reynctl.langgraph.names import agent_name as agent_name
from reynctl.langgraph.saver import ReyndSaver as ReyndSaver

__all__ = ["ReyndSaver", "agent_name"]
