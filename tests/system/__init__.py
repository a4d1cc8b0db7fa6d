"""Real processes: crashes, replicas, workers, drains, fuzz, the README and the deploy."""
