"""The turn engine: the one door a turn enters by (`turns`), admission (`admit`: the checks the
layers above plug in, then the gate), the row as the engine writes it (`records`), the effects a
transaction applies after it commits (`effects`), the queue pass and its candidates, a turn's
completion, StartNow and restart, archive and crash recovery (`lifecycle`), the leases of running
turns, the fleet as the gate counts it, the pause record and its one resume, and the sweep that
re-arms a lost re-check.
"""
