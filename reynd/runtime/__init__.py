"""The agent runtime: agents run inside the daemon as trio tasks."""
