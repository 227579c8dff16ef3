"""yagent.workers.memory — a task's conversation memory and its file on disk."""

from .conversation import ConversationMemory, load_memory, memory_path

__all__ = ["ConversationMemory", "load_memory", "memory_path"]
