"""yagent.workers — everything that runs inside a worker process (one per agent run)."""
