"""The holds: every admission check beyond the gate, each a plug-in `scheduler.wiring` registers —
operator holds (`operator`), queue holds (`queue`) and the runner outcomes that place them
(`outcome`), prerequisites, blocked interference, cost budgets, a session's own cost cap,
concurrency groups, weighted capacity and the deference window, and the auth outage — with their
periodic sweep (`sweep`) and the one read model every surface shows them through (`view`).
"""
