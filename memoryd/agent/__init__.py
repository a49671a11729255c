"""The agent: the tool loop with provider memory, atomic turns, a run journal and resume."""

from memoryd.agent.agent import Agent, PendingRun, RunResult
from memoryd.agent.journal import RunJournal, RunRecord

__all__ = ["Agent", "PendingRun", "RunJournal", "RunRecord", "RunResult"]
