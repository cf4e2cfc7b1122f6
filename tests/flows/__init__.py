"""The flows and their Prefect tasks (``flows/``)."""
