"""yagent.workers.context — what goes into a model's context window and what it costs.

Today: token counting (`tokens`). Compression and thinklink come later.
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
