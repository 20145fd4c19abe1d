"""The assistant: a model that sorts the mail of owners who switch it on (SPEC §9).

* :mod:`.base` — the one protocol every model adapter implements (stored
  facts of a message → a tab with a confidence and a reason, or no verdict).
* :mod:`.openai_http` — an OpenAI-compatible ``/v1/chat/completions`` endpoint
  (a local llama.cpp or ollama server, or a hosted one) through the SSRF guard.
* :mod:`.offline` — an embedding model shipped in a PyPI package plus a linear
  classifier trained on the owner's corrected and confidently sorted mail.
* :mod:`.config` — which adapter, ``hold_max_seconds``, the owner's switch.
* :mod:`.hold` — whether new mail waits for the verdict (a list of reasons not to).
* :mod:`.release` — the one releaser the verdict, the delayed job and the sweep share.
* :mod:`.classify` — asking once and applying the verdict (a cascade stage).
* :mod:`.catchup` — the newest never-asked mail, every 15 minutes.
* :mod:`.stats` — median and p95 hold time, the share released before the verdict.
"""
