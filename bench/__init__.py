"""Benchmarks of the quota throttle against DRF's own throttle and bare Redis.

Run with ``python -m bench`` (or ``make bench``); ``--quick`` for a short run.
Everything runs against a private redis-server started for the run, never a
shared one. This is a benchmark, not a test: it reports figures and checks
them against targets, it does not fail the build.
"""
