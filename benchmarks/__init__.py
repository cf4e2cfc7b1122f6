"""Benchmarks of the drilldown engine: root-cause accuracy (``rca``) and speed at scale (``scale``).

Not part of the installed product; run from the repository root, see ``benchmarks/README.md``.
"""
