"""Endpoint presets for the provider form. A preset fills only fields that are still empty; the
connectivity probe, not this table, is the authority on whether an endpoint works."""

from __future__ import annotations

from dataclasses import dataclass

from yagent.ipc.zero_config import LOCAL_KEY_PLACEHOLDER

__all__ = ["PRESETS", "Preset"]


@dataclass(frozen=True, slots=True)
class Preset:
    label: str
    name: str
    api_base_url: str
    api_key_env: str = ""
    api_key: str = ""
    model: str = ""
    api_format: str = ""

    def values(self) -> dict[str, str]:
        """Form field → value, for the fields this preset knows."""
        out = {"name": self.name, "api_base_url": self.api_base_url, "model": self.model,
               "api_format": self.api_format}
        if self.api_key_env:
            out["api_key_env"] = self.api_key_env
        if self.api_key:
            out["api_key"] = self.api_key
        return {k: v for k, v in out.items() if v}


PRESETS: tuple[Preset, ...] = (
    Preset("DeepSeek", "deepseek", "https://api.deepseek.com/v1", api_key_env="DEEPSEEK_API_KEY",
           model="deepseek-chat"),
    Preset("OpenAI", "openai", "https://api.openai.com/v1", api_key_env="OPENAI_API_KEY", model="gpt-4o-mini"),
    Preset("Anthropic", "anthropic", "https://api.anthropic.com", api_key_env="ANTHROPIC_API_KEY",
           api_format="anthropic"),
    Preset("OpenRouter", "openrouter", "https://openrouter.ai/api/v1", api_key_env="OPENROUTER_API_KEY"),
    Preset("Ollama (local)", "ollama", "http://localhost:11434/v1", api_key=LOCAL_KEY_PLACEHOLDER),
    Preset("vLLM (local)", "vllm", "http://localhost:8000/v1", api_key=LOCAL_KEY_PLACEHOLDER),
    Preset("llama.cpp server (local)", "llamacpp", "http://localhost:8080/v1", api_key=LOCAL_KEY_PLACEHOLDER),
    Preset("LiteLLM proxy (local)", "litellm", "http://localhost:4000/v1", api_key_env="LITELLM_API_KEY"),
)
