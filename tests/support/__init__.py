"""Helpers the tests share that are not fixtures (the fixtures are in ``tests/conftest.py``)."""
