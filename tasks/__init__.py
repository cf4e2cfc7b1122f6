"""Units of work: strict loading, profiling (plain functions plus Prefect tasks)."""
