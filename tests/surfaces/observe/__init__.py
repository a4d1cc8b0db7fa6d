"""Logs and metrics as an operator reads them."""
