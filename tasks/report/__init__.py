"""The report of an investigation: ``markdown.py`` (report.md from the engine's explanation),
``charts.py`` (the charts, from the SQL tools' numbers), ``model.py`` (the report model), ``render.py`` and ``templates/`` (report.md, report.html and the artifact from it), ``text.py`` (escaping, formats, names), ``files.py`` (report.html and the chart
files), ``write.py`` (every output, result.json last). May import ``sql_tools``, the engine's
result models, the agent's ledger and :mod:`tasks.run`."""
