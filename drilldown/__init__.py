"""The front ends: the ``drilldown`` command line (:mod:`drilldown.cli`) and the MCP server
(:mod:`drilldown.mcp_server`). They may import everything below them; nothing imports them."""
