"""A trigger for the fault-1 scenario of ``test_airflow_deployment.py``. The fixture copies it
into the deployment's plugins folder, which Airflow puts on ``sys.path`` of every process (the
triggerer imports triggers by class path; DAG files are imported under mangled names).

When a user clears a deferred task, Airflow cancels the old trigger (``on_kill``) and schedules
a new try; in the reported fault the new try adopted the running app first and the old
``on_kill`` then cancelled it. :class:`AdoptionAwaitingTrigger` makes that order certain: its
``on_kill`` first waits (bounded) until another try has recorded itself as the app's owner.
"""

from __future__ import annotations

import asyncio
import time

from torchx_airflow.trigger import TorchXTrigger
from torchx_core.runner import get_runner

#: how long on_kill waits for the new try (the deployment allows on_kill 120 s)
ADOPTION_WAIT_S = 90.0


class AdoptionAwaitingTrigger(TorchXTrigger):
    """A :class:`TorchXTrigger` whose ``on_kill`` runs only after a newer try adopted the app
    (or after :data:`ADOPTION_WAIT_S`)."""

    def _adopted(self) -> bool:
        with get_runner() as runner:
            return runner.owner(self.app_handle) not in (None, self.owner)

    async def on_kill(self) -> None:
        deadline = time.monotonic() + ADOPTION_WAIT_S
        while time.monotonic() < deadline and not await asyncio.to_thread(self._adopted):
            await asyncio.sleep(0.2)
        self.log.info("on_kill after adoption: the app is owned by a newer try")
        await super().on_kill()
