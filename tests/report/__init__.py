"""The report (``tasks/report/``)."""
