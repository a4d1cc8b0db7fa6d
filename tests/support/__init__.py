"""Helpers the tests share: the harness, loopback mocks, fixtures. Nothing here is collected."""
