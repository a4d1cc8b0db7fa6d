"""Settings and what `pacer serve` checks before it starts."""
