"""A project's browser, run by the daemon as a process of its own (`python -m yagent.workers.browser`): Chromium
driven by Playwright over the DevTools pipe, and the fourteen browser tools carried out on it.

Importing the package loads nothing: `tool_schemas` (the tools' declarations, read by the worker's static tools) is
plain data; Playwright comes in only with `host`, `actions` and `serve`, which only the host process imports.
"""
