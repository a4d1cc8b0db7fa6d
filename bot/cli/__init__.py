"""`pacer` on the command line: the subcommands (`main`), `pacer policy` and `pacer simulate`
(`policy`), and `pacer console` (`console`). `python -m bot.cli` runs `main`."""
