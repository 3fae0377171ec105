"""Privacy accounting: budgets, privacy events, the accountants of every composition rule,
amplification by sampling, and the one module that draws released noise (OpenDP).
Imports only :mod:`planner.core`.
"""
