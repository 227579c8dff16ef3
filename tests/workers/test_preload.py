"""What the forkserver's preload leaves done for every worker it forks (workers/preload.py): a worker inherits the
preloaded process's module state, so a process that imported the preload shows what each worker starts with."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Counts the regular expressions compiled while a response's cookies are read, after the preload (or not).
_PROBE = textwrap.dedent("""
    import re, sys
    if sys.argv[1] == "preloaded":
        import yagent.workers.preload
    import httpx
    compiled = []
    compile_ = re.compile
    re.compile = lambda *args, **kwargs: compiled.append(args[0]) or compile_(*args, **kwargs)
    response = httpx.Response(200, request=httpx.Request("POST", "http://127.0.0.1:8000/v1/chat/completions"))
    httpx.Cookies().extract_cookies(response)
    print(len(compiled))
""")


def _compiled_reading_cookies(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def test_after_the_preload_a_responses_cookies_are_read_without_compiling_a_regular_expression() -> None:
    # The probe sees what it looks for: a process without the preload compiles urllib's patterns at this point.
    assert _compiled_reading_cookies("bare") > 0
    assert _compiled_reading_cookies("preloaded") == 0
