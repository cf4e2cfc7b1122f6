"""The agent (``tasks/agent/``)."""
