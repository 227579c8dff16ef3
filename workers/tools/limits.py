"""The numbers the tools enforce, in one place."""

from __future__ import annotations

MAX_FILE_BYTES = 10 * 1024 * 1024  # read_file refuses larger files; edits refuse larger inputs and results
SOFT_WARN_BYTES = 2 * 1024 * 1024  # read_file adds a warning above this size
LINES_PER_READ = 1000  # read_file returns at most this many lines per call
MAX_LINE_CHARS = 2000  # read_file cuts longer lines (minified files)
LIST_DIR_MAX_ENTRIES = 1000
TREE_MAX_LINES = 500
TREE_DEFAULT_DEPTH = 3
TREE_MAX_DEPTH = 8
SEARCH_DEFAULT_RESULTS = 100
SEARCH_MAX_RESULTS = 500
SEARCH_LINE_CHARS = 300  # matched lines are cut to this length in both search back-ends
BASH_DEFAULT_TIMEOUT = 120  # seconds
BASH_MAX_TIMEOUT = 1800
BASH_OUTPUT_CAP = 20_000  # characters of command output shown to the model (head + tail)
