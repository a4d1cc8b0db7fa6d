"""The `pacer` command: output, simulate, known failures."""
