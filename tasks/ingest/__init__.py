"""Ingest: uploaded files into DuckDB, all rows or a one-line error naming the line.

``load.py`` (the entry: :func:`~tasks.ingest.load.load_files`), ``_csv/`` (the byte-level CSV
check), ``_sniff.py`` (encoding and delimiter), ``_duck.py`` (DuckDB reads and type checks),
``_names.py`` (table and column names), ``profile/`` (column profiles and join keys),
``storage.py`` (files from Supabase Storage). May import ``sql_tools``; nothing else of ours.
"""
