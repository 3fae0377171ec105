"""Data in: the declared schema, file loading, allow-listed sources, and the backends that
compute exact, clipped, contribution-bounded aggregates. Imports only the layers below
(:mod:`planner.core`, :mod:`planner.privacy`).
"""
