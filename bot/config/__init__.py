"""Settings: the fields and where they are read from (`settings`), the rule each value must
follow (`rules`), and what `pacer serve` refuses to start with (`checks`)."""
