"""Triggers as code."""
