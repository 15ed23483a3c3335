"""The example suite's groupd: the plugin's defaults plus a two-partition topic."""

import pytest


@pytest.fixture(scope="session")
def groupd_settings():
    return {"topics": "words:2"}
