"""Helper programs for the ledger's concurrency and crash tests (run in child processes)."""
