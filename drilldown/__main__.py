"""``python -m drilldown``: the command line."""

from drilldown.cli import main

main()
