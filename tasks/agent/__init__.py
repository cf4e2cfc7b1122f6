"""The investigation agent: hypotheses, the Claude tool-use loop and the offline planner over the
SQL tools, the evidence ledger and the Finding Gate (plain modules, no Prefect inside)."""
