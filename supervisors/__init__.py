"""OTP supervision for Pykka actors.

Pykka gives actors; this package gives what Erlang/OTP puts around them:
supervisors with restart strategies and restart intensity, child specs,
synchronous ordered starts with a ready handshake, exit reasons reported on
every exit path, a name registry whose names follow restarts, and fault
injection. It never imports memoryd.

```python
from supervisors import ChildSpec, Restart, Strategy, SupervisedActor, Supervisor

class Worker(SupervisedActor):
    def init(self) -> None: ...            # acquire resources (actor's thread)
    def terminate(self, exit) -> None: ... # release them, on every exit path

sup = Supervisor.start(name="root", strategy=Strategy.ONE_FOR_ONE, children=[
    ChildSpec(id="w", start=lambda: Worker.start(name="w"), restart=Restart.PERMANENT)])
```
"""

from supervisors._actor import Killed, SupervisedActor
from supervisors._backoff import Backoff, BackoffWindow
from supervisors._control import kill, shutdown_actor
from supervisors._errors import (
    CallTimeout,
    ChildRunning,
    ChildSpecError,
    NameTaken,
    StartError,
    SupervisorError,
    UnknownChild,
)
from supervisors._exit import Exit, ExitKind
from supervisors._inbox import Inbox
from supervisors._intensity import RestartIntensity
from supervisors._link import linked
from supervisors._plan import RestartPlan, plan_restart
from supervisors._registry import register, registered, unregister, whereis
from supervisors._spec import ChildSpec, Restart, Strategy
from supervisors._supervisor import DynamicSupervisor, Supervisor
from supervisors._supervisor_actor import ChildInfo

__all__ = [
    "Backoff",
    "BackoffWindow",
    "CallTimeout",
    "ChildInfo",
    "ChildRunning",
    "ChildSpec",
    "ChildSpecError",
    "DynamicSupervisor",
    "Exit",
    "ExitKind",
    "Inbox",
    "Killed",
    "NameTaken",
    "Restart",
    "RestartIntensity",
    "RestartPlan",
    "StartError",
    "Strategy",
    "SupervisedActor",
    "Supervisor",
    "SupervisorError",
    "UnknownChild",
    "kill",
    "linked",
    "plan_restart",
    "register",
    "registered",
    "shutdown_actor",
    "unregister",
    "whereis",
]
