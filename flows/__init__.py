"""The composition of an investigation's steps and the Prefect flows that run them:
:mod:`flows.investigation` (``investigation``, the one composition, in-process or inside a flow
run) over the steps' plain functions (:mod:`flows.step_functions`); the flows ``investigate``
(:mod:`flows.investigate`), ``weekly-review`` (:mod:`flows.weekly_review`) and ``review-metric``,
its one run per metric (:mod:`flows.review_metric`, started by :mod:`flows.metric_runs`); and the
steps as Prefect tasks with their retry and cache policies (:mod:`flows.steps`). May import
``tasks``, ``sql_tools`` and Prefect; :mod:`flows.investigation` and :mod:`flows.step_functions`
reach Prefect only once it is loaded (a flow run loads it), so an in-process investigation never
loads it."""
