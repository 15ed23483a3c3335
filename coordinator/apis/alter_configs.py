"""AlterConfigs (33), v0–v2: v1 changes nothing on the wire, v2 is flexible.

The legacy API: the configs listed for a resource become its whole set (those not listed go back to
their defaults). As IncrementalAlterConfigs: GROUP and TOPIC resources.
"""

from __future__ import annotations

from groupd.coordinator.core.group_config import replaced
from groupd.protocol.apis import ApiKey

from .incremental_alter_configs import alter_each
from .request import Request

KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)


def handle(node, request: Request):
    body = request.body
    return alter_each(node, request, [(r.resource_type, r.resource_name, [(c.name, c.value) for c in r.configs])
                                      for r in body.resources], lambda current, configs: replaced(configs),
                      body.validate_only)
