"""The report of an investigation: ``model.py`` (one report model from the engine's explanation),
``render.py`` with ``templates/`` (report.md, report.html and the run's artifact from that model),
``text.py`` (escaping, defanging, number formats, segment names), ``markdown.py`` (report.md),
``charts.py`` (the charts, from the SQL tools' numbers), ``files.py`` (report.html and the chart
files), ``write.py`` (every output, result.json last). May import ``sql_tools``, the engine's
result models, the agent's ledger and :mod:`tasks.run`."""
