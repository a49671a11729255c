"""Agents as supervised virtual actors: `AgentSystem`, addressed by (agent type, key).

```python
from memoryd.agents import AgentSystem

system = AgentSystem.start({"researcher": lambda key: memoryd.Agent(llm=model)}, name="crew")
system.call("researcher", "user-42", "Find X", request_id="req-1").text
```
"""

from memoryd.agents.system import AgentSystem, InstanceInfo

__all__ = ["AgentSystem", "InstanceInfo"]
