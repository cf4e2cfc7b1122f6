"""The SQL tools (``sql_tools/``)."""
