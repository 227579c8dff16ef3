"""yagent.workers.context — what goes into a model's context window and what it costs.

Token counting (`tokens`, `token_ledger`), how full the context is (`measurement`, `threshold`, `breakdown`), the
pieces of the three compression tiers (`rule_truncation`, `emergency`, `ultimate`), the thinklink (`thought`,
`thinklink`) and the project's instructions (`project_instructions`). The loop's use of them is
`workers/agents/compaction.py`. This package imports nothing of `workers.llm` (which imports it); only the
counting functions are re-exported here.
"""

from .tokens import (
    EXACT_LIMIT,
    MessageLike,
    count_tokens,
    count_tokens_exact,
    estimate_message_tokens,
    estimate_messages_tokens,
)

__all__ = [
    "EXACT_LIMIT",
    "MessageLike",
    "count_tokens",
    "count_tokens_exact",
    "estimate_message_tokens",
    "estimate_messages_tokens",
]
