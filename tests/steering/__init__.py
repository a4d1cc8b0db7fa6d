"""Promotion, session events, the gate card, steering in order."""
