"""Planning: queries and their statistics, mechanisms' calibration and accuracy, the
workload, the allocator, bounds, simulations, advice and plan files. Imports only the
layers below.
"""
