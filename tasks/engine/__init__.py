"""The drilldown engine: measure a change, test it, and find the segments that caused it."""

from tasks.engine.explain import explain_change

__all__ = ["explain_change"]
