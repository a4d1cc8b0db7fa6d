"""The pauses: what stops running spot work and brings it back — the budget ceiling and its early
notice (`ceiling`, `budget_notice`), preemption by a priority start, a deliberate park into the
spot queue (`parking`) and a wall-clock sleep (`sleep`), each writing the engine's one pause
record and resuming through its one resume (`scheduler/engine/pause.py`) — and the ceiling's
sibling, the backlog top-up sweep, which hands an idle fleet more work.
"""
