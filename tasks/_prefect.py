"""Prefect task entries built on first use, so importing a unit of work (and the CLI's start-up)
never pays for importing Prefect.

A module declares ``__getattr__ = lazy_task("decompose_task", decompose, cache=True)``; the
first access to ``module.decompose_task`` builds the task with its policy:

- ``cache``: keyed on the inputs and the task's source. Inputs are paths, plain data and the
  data's content hash (``data_hash``), never a connection, so a repeated or crashed run skips
  the work already done on the same data.
- ``retries``: only for transient errors (network, rate limits, overload), with backoff.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TRANSIENT_NAMES = (
    "RateLimitError",
    "InternalServerError",
    "APIConnectionError",
    "APITimeoutError",
    "StoreUnavailable",
    "HypothesisUnavailable",
    "StorageUnavailable",
    "ConnectionError",
    "TimeoutError",
)


def is_transient(exc: BaseException) -> bool:
    """An error worth retrying: network trouble, rate limits, overload."""
    names = {t.__name__ for t in type(exc).__mro__}
    return any(n in names for n in TRANSIENT_NAMES)


def _retry_condition(task: Any, task_run: Any, state: Any) -> bool:
    try:
        state.result()
    except Exception as exc:  # the failure being judged
        return is_transient(exc)
    return False


def lazy_task(
    name: str, fn: Callable[..., Any], *, cache: bool = False, retries: int = 0
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that builds task ``name`` from ``fn`` on first use."""
    return lazy_tasks({name: (fn, {"cache": cache, "retries": retries})})


def lazy_tasks(specs: dict[str, tuple[Callable[..., Any], dict[str, Any]]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for several tasks: ``{name: (fn, {"cache", "retries"})}``."""
    built: dict[str, Any] = {}

    def __getattr__(attr: str) -> Any:
        if attr not in specs:
            raise AttributeError(attr)
        if attr not in built:
            built[attr] = _build(attr, *specs[attr])
        return built[attr]

    return __getattr__


def _build(name: str, fn: Callable[..., Any], policy: dict[str, Any]) -> Any:
    from prefect import task
    from prefect.cache_policies import INPUTS, TASK_SOURCE

    options: dict[str, Any] = {"name": name.removesuffix("_task").replace("_", "-")}
    if policy.get("cache"):
        options.update(cache_policy=INPUTS + TASK_SOURCE, persist_result=True)
    retries = int(policy.get("retries") or 0)
    if retries:
        options.update(
            retries=retries,
            retry_delay_seconds=[2, 10, 30][:retries],
            retry_condition_fn=_retry_condition,
        )
    return task(**options)(fn)
