"""The engine (``tasks/engine/``)."""
