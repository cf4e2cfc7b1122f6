"""The Prefect flows and tasks over the investigation's steps: the flows ``investigate``
(:mod:`flows.investigate`: :func:`tasks.investigation.investigation` on the flow's road),
``weekly-review`` (:mod:`flows.weekly_review`) and ``review-metric``, its one run per metric
(:mod:`flows.review_metric`, started by :mod:`flows.metric_runs`); and the steps as Prefect
tasks with their retry and cache policies (:mod:`flows.steps`). May import ``tasks``,
``sql_tools`` and Prefect."""
