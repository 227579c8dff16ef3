"""Every error a model call can end with, in one place.

    LLMError                    base: carries provider, model, HTTP status (None without a response)
    ├── LLMAuthError            401/403, or an auth error event: the key is wrong or lacks access
    ├── LLMBadRequestError      400/404/413/422 and other 4xx: the request itself is rejected (not retried)
    ├── LLMRateLimitError       429 or a rate-limit event: retried, honouring Retry-After
    ├── LLMServerError          5xx, 409, overload events, malformed stream data: retried
    ├── LLMNetworkError         connection refused/reset, stream cut short: retried; a redirect or a
    │                           200 that is not the API (a proxy's HTML page): not retried
    └── LLMTimeoutError         408, a stalled stream or the request budget (`[llm] timeout`) spent

Each message names the provider, the model and the HTTP status, and says what to do next.
`retryable` tells the retry loop whether another attempt can help.
"""

from __future__ import annotations

__all__ = [
    "LLMAuthError",
    "LLMBadRequestError",
    "LLMError",
    "LLMNetworkError",
    "LLMRateLimitError",
    "LLMServerError",
    "LLMTimeoutError",
    "error_for_status",
]

_ADVICE = {
    "LLMAuthError": "check api_key / api_key_env of this provider in config.toml",
    "LLMBadRequestError": "the provider rejected the request; check the model name and the limits in the "
                          "provider's documentation",
    "LLMRateLimitError": "wait, lower [llm] max_in_flight_requests, or configure fallback_providers",
    "LLMServerError": "the provider is failing; retry later or configure fallback_providers",
    "LLMNetworkError": "check api_base_url and the network path to the provider",
    "LLMTimeoutError": "raise [llm] timeout or check whether the provider is overloaded",
}


class LLMError(Exception):
    """Base class of every model-call failure."""

    retryable = False

    def __init__(self, detail: str, *, provider: str, model: str, status: int | None = None,
                 retry_after: float | None = None, attempts: int = 1) -> None:
        self.detail = detail
        self.provider = provider
        self.model = model
        self.status = status
        self.retry_after = retry_after
        self.attempts = attempts
        super().__init__(self._render())

    def _render(self) -> str:
        status = f"HTTP {self.status}" if self.status is not None else "no HTTP status"
        tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        advice = _ADVICE.get(type(self).__name__, "")
        return (f"provider {self.provider!r} (model {self.model}) failed{tries}: {status}: {self.detail}"
                + (f" — {advice}" if advice else ""))

    def with_attempts(self, attempts: int) -> LLMError:
        """The same error re-rendered with the number of attempts made."""
        self.attempts = attempts
        self.args = (self._render(),)
        return self


class LLMAuthError(LLMError):
    pass


class LLMBadRequestError(LLMError):
    pass


class LLMRateLimitError(LLMError):
    retryable = True


class LLMServerError(LLMError):
    retryable = True


class LLMNetworkError(LLMError):
    retryable = True


class LLMTimeoutError(LLMError):
    retryable = True


def error_for_status(status: int, detail: str, *, provider: str, model: str,
                     retry_after: float | None = None) -> LLMError:
    """Classify an HTTP error status: only 408, 409, 429 and 5xx are worth another attempt."""
    kwargs = {"provider": provider, "model": model, "status": status, "retry_after": retry_after}
    if status in (401, 403):
        return LLMAuthError(detail, **kwargs)
    if status == 429:
        return LLMRateLimitError(detail, **kwargs)
    if status == 408:
        return LLMTimeoutError(detail, **kwargs)
    if status == 409 or status >= 500:
        return LLMServerError(detail, **kwargs)
    return LLMBadRequestError(detail, **kwargs)
