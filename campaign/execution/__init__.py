"""Real execution of a committed window: a supervised trainer, its events, injected faults and the measured
summary analyse reads like a simulated one (docs/execution.md)."""
