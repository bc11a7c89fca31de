"""Memory evidence read from Prometheus (PromQL over its HTTP API)."""
