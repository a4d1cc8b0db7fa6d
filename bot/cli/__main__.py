"""`python -m bot.cli`: the `pacer` command, as the installed script runs it."""

import sys

from bot.cli.main import main

sys.exit(main())
