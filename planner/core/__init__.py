"""Foundations every layer may use: errors, special functions, root finding, strict JSON,
text made safe to show, spreadsheet-safe CSV cells and the server secret. Imports nothing
else from the planner.
"""
