from __future__ import annotations

# A provider the scripted agent never calls: with it the client does not open the first-run wizard.
PROVIDER_CONFIG = """[global.llm]
use_provider = "idle"
[global.llm.providers.idle]
api_base_url = "http://127.0.0.1:9/v1"
api_key = "unused"
model = "unused"
"""
