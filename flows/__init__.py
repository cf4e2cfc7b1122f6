"""Prefect flows and the Prefect tasks they compose: ``investigate`` (:mod:`flows.investigate`,
the one composition of an investigation's steps), ``weekly-review`` and the tasks with their
retry and cache policies (:mod:`flows.steps`). May import ``tasks``, ``sql_tools`` and Prefect."""
