"""Reliability suites: power loss (syscall traces), I/O faults, actor crashes, histories."""
