"""The drilldown engine: measure a change, test it, and find the segments that caused it."""

from tasks.engine.explain import Analysis, SegmentTest, analyze, explain_change

__all__ = ["Analysis", "SegmentTest", "analyze", "explain_change"]
