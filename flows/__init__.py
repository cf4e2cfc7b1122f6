"""Prefect flows and the drilldown command line."""
