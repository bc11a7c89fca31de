"""Remediation actions: declarations (pure) and their executors (adapters)."""
