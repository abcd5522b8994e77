"""Chat backends behind one small interface: ``stream(requests)`` yields results as they complete.

``OpenAIBackend`` talks to any OpenAI-compatible server; ``HFBackend`` generates with a local
transformers model (torch is imported only when it first generates).  The engine picks one with
a plain ``if`` on the config.
"""
