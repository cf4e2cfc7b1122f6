"""The units of work, one folder per concern; plain Python (no Prefect inside: the flows wrap
these in tasks). From the bottom up, each may import the ones before it and ``sql_tools``:

- ``ingest/``: files into DuckDB, strictly (CSV checks, types, profiles, Supabase Storage).
- ``engine/``: measure a change, test it, find the segments that caused it; the engine as a tool.
- ``tools.py``: the product's tool registry (the SQL tools plus the engine's tool).
- ``run.py``: one investigation's state, handed from step to step.
- ``agent/``, ``report/``, ``store/``: hypotheses and their investigation; result.json, report
  and charts; the memory of past investigations. The agent imports neither of the others; the
  report reads the agent's ledger and models but runs no agent and stores nothing; the store
  stores what it is given.
- ``request.py``, ``steps.py``, ``investigation.py``: what to investigate (the one question
  object); the investigation's steps; their composition, a plain pipeline (the ``investigate``
  flow runs the same one with each step a Prefect task).

``tests/test_layout.py`` holds these rules.
"""
