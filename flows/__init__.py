"""Prefect flows and the Prefect tasks they compose: ``investigate`` (:mod:`flows.investigate`,
the one composition of an investigation's steps), ``weekly-review`` (:mod:`flows.weekly_review`)
and ``review-metric``, its one run per metric (:mod:`flows.review_metric`, started by
:mod:`flows.metric_runs`), and the tasks with their retry and cache policies
(:mod:`flows.steps`). May import ``tasks``, ``sql_tools`` and Prefect."""
