"""Benchmarks for the purgatory engine (not tests: run them with ``make bench``).

Each module is runnable with ``python -m bench.<module>``, prints a markdown table to
stdout and can write the raw numbers as JSON under ``bench/results/`` (gitignored).
"""
