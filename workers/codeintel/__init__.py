"""yagent's built-in code server: code intelligence for one project over MCP (stdio), run by the daemon as
`python -m yagent.workers.codeintel` in a confined process of its own. See README.md in this folder.

Importing the package loads nothing: the process confines itself before numpy, the MCP SDK or any thread exist.
"""
