"""yagent.workers.memory — a task's conversation memory and its file on disk."""

from .conversation import ConversationMemory, MemoryFileError, load_memory, memory_path

__all__ = ["ConversationMemory", "MemoryFileError", "load_memory", "memory_path"]
