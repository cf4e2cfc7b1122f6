"""The drilldown engine: measure a change, test it, and find the segments that caused it.

The entry is :func:`tasks.engine.explain.explain_change` (and :func:`~tasks.engine.explain.analyze`
for the statistics behind it). This package's ``__init__`` imports nothing, so that a caller
needing only the parser, the models or the engine's tool definition does not load the numerical
stack. May import ``sql_tools``; nothing else of ours.
"""
