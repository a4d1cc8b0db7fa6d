"""The REST API over real HTTP."""
