"""pitcrew: diagnoses Ray-on-Kubernetes failures and offers approved remediations."""

__version__ = "0.1.0"
