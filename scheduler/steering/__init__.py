"""Steering: what moves work from outside the queue's own order — a human message's promotion,
a trigger firing into a session, the release of promoted sessions after a trigger's class
changes, session and fleet events to `ao_event` triggers — and what a person reads to steer by:
the gate card and the day's timeline.
"""
