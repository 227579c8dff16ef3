"""Git checkpoints of a project: the git work behind `git_checkpoint_*`, `yagent diff` and `yagent undo`.

This package runs only in the short process the daemon starts for one job (`process.py`), outside any agent's
confinement and inside its own (it writes the repository's objects and refs, and the project when it restores).
The daemon decides what to do and keeps the record (`daemon/checkpoints.py`); this package does the git work:
finding and checking the repository (`repository.py`), running git without hooks or filters (`git_runner.py`),
capturing the project as a commit on a ref of our own (`snapshot.py`), comparing (`changes.py`), putting files back
(`restore.py`), squashing a turn's changes onto an agent branch (`squash.py`), one job end to end (`jobs.py`).
Importing it loads nothing beyond the standard library and `yagent.ipc`.
"""
