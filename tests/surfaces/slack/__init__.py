"""Slack through the real Bolt app against a loopback mock of the Web API."""
