"""A framework's records kept as an external reynd agent: what LangGraph's ReyndSaver and the
OpenAI Agents SDK's ReyndSession share.

Each keeps one framework object (a LangGraph thread, an SDK session) as one
external agent: an open turn whose steps are the framework's operations,
read back through `wal.read` on the active lineage and written in fenced
atomic batches. `kind` names the agent, `view` replays its lifecycle,
`records` builds what is appended, `store` reads and writes.
"""
