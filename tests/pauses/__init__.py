"""The ceiling, preemption, parking, the top-up sweep and the early notice."""
