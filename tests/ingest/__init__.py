"""Ingest (``tasks/ingest/``)."""
