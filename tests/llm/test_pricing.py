"""What a model call costs: the provider's configured price, else the catalog's list price; unknown is None."""

from __future__ import annotations

import pytest

from yagent.ipc.provider_config import ModelPrice, parse_llm_config
from yagent.workers.llm import Usage, call_cost, default_catalog, price_for


def _config(**provider: object):
    table = {"api_base_url": "http://x", "model": "claude-sonnet-4-5", "api_key": "k", **provider}
    return parse_llm_config({"global": {"llm": {"use_provider": "p", "providers": {"p": table}}}}, {})


def test_a_known_model_costs_its_list_price_with_cached_input_at_the_cache_rate() -> None:
    usage = Usage(total_input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=100_000)
    # claude-sonnet-4-5: $3 input, $0.30 cache read, $15 output per million
    assert call_cost(_config(), "p", "claude-sonnet-4-5-20250929", usage) == pytest.approx(0.6 * 3 + 0.4 * 0.3 + 1.5)
    price = default_catalog().price("claude-sonnet-4-5")
    assert price is not None and price.as_of  # the date the list price was taken


def test_the_providers_own_price_wins_and_zero_means_free() -> None:
    usage = Usage(total_input_tokens=2_000_000, output_tokens=1_000_000)
    assert call_cost(_config(price={"input": 1, "output": 2}), "p", "claude-sonnet-4-5", usage) == pytest.approx(4)
    assert call_cost(_config(price={"input": 0, "output": 0}), "p", "anything", usage) == 0.0
    priced = _config(price={"input": 1, "output": 2, "cached_input": 0.5}).providers["p"].price
    assert priced == ModelPrice(input=1.0, output=2.0, cached_input=0.5)


def test_an_unknown_model_has_no_price_and_a_look_alike_name_does_not_borrow_one() -> None:
    usage = Usage(total_input_tokens=10, output_tokens=10)
    assert call_cost(_config(model="my-local-llama"), "p", "my-local-llama", usage) is None
    assert price_for(_config(model="x"), "p", "gpt-4o-audio-preview") is None  # not gpt-4o's price
    assert default_catalog().lookup("gpt-4o-audio-preview") is not None  # though routing still finds a family


@pytest.mark.parametrize("bad", [{"input": 1}, {"input": -1, "output": 1}, {"input": float("nan"), "output": 1},
                                 {"input": 1, "output": 1, "per": "token"}, "cheap"])
def test_a_bad_price_table_is_refused_saying_how_to_write_it(bad: object) -> None:
    with pytest.raises(ValueError, match="price"):
        _config(price=bad)
