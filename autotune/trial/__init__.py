"""One trial: launch, watch, verify, probe, record — and leave nothing behind."""
