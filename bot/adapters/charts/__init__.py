"""Charts pitcrew posts beside its cards (matplotlib, Agg backend, PNG bytes)."""
