"""The memory store (``tasks/store/``)."""
