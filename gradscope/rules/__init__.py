"""Findings from RunStats: the troubleshooting table as pure functions (no torch)."""
