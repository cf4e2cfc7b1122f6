"""The command line and the MCP server (``drilldown/``)."""
