"""Which OpenAI route a prompt takes: ``/v1/chat/completions`` or ``/v1/completions`` (settings.json ``mode``).

Why both: a chat request has the server wrap the prompt in the model's chat template, which an instruct model
needs; a base or Alpaca-style checkpoint (WizardMath, WizardCoder) has no chat template and was evaluated with
its published prompt as raw text, which only ``/v1/completions`` sends exactly. vLLM answers a chat request for
such a model with a 400, TGI with a 422, ``transformers serve`` with a bare 500.

- ``"chat"``: the messages as they are, on the chat route.
- ``"completions"``: the prompt the messages hold (:func:`completion_prompt`: one user message's text, the kit's
  only shape) on the completions route, with the same sampling, ``max_tokens`` and stops. Evaluation's text is
  the benchmark's whole published prompt (``Benchmark.prompt``), sent exactly; a backend given a
  ``prompt_format`` (evolution, the judges: the Alpaca prompt ``World.train_prompt`` writes without the CoT
  opener, what ``HFBackend`` asks a local model without a chat template) sends the instruction in that format.
- ``"auto"``: chat, until a chat request is refused because the model has no chat template; from then on
  completions for every request of that backend, the refused one sent again there at once. "No chat template"
  is read from the refusal (:func:`no_chat_template`): a 400 / 422 / 500 whose words name a chat template (vLLM,
  TGI, llama.cpp) or a 500 with no words at all beyond "Internal Server Error" (``transformers serve``: the
  template error is an unhandled exception there), the latter confirmed only when the same request then
  answers on the completions route (retried once if need be: uvicorn closes the connection after that 500, and a
  request already on its way over it fails as a connection error). A llama.cpp server never refuses: it applies its default (ChatML)
  template to a model without one, so name "completions" there for a base model.

The choice is per backend, made on its first answered request (the backend sends that one alone), and used for
every later one; :class:`ModeChooser` holds it, ``used`` says which route answered (what ``check-api`` shows).
The refused chat request and its resend are one request to the usage ledger and the budgets (the refusal generated
nothing), each of the two HTTP requests with its own ``api.timeout`` and ``api.max_reply_bytes``.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from rleif_kit.llm.errors import server_message

__all__ = ["ModeChooser", "completion_prompt", "no_chat_template", "no_template_advice", "reply_choice", "send"]

#: Statuses a server refuses a template-less chat request with: vLLM 400, TGI 422, transformers serve 500.
TEMPLATE_STATUSES = (400, 422, 500)
_TEMPLATE_WORDS = re.compile(r"chat[ _-]?template|template not found|no template", re.I)
_BARE_500 = re.compile(r"(internal server error)?\.?", re.I)


def completion_prompt(messages: Any, prompt_format: Callable[[str], str] | None = None) -> str:
    """The text a completions request sends for ``messages``: the contents in order, joined by a blank line (one
    user message, as every request of the kit is: its text exactly), in ``prompt_format`` when one is given."""
    parts = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(content if isinstance(content, str) else "")
    text = "\n\n".join(parts)
    return prompt_format(text) if prompt_format is not None else text


def no_chat_template(exc: BaseException) -> str | None:
    """"named" when the refusal of a chat request says the model has no chat template, "bare" for a 500 without
    any words (transformers serve's unhandled template error: to be confirmed on the completions route), None
    otherwise."""
    status = getattr(exc, "status_code", None)
    if status not in TEMPLATE_STATUSES:
        return None
    text = server_message(exc)
    if _TEMPLATE_WORDS.search(text):
        return "named"
    return "bare" if status == 500 and _BARE_500.fullmatch(text.strip()) else None


def no_template_advice(role: str) -> str:
    """What to set when a chat request was refused for want of a chat template."""
    return (f'the model has no chat template: set "mode": "completions" (or "auto") in settings.json (api.mode or '
            f"models.{role}.mode) to send the prompt as it is on /v1/completions")


def chat_params(model: str, messages: Any, *, temperature: float, top_p: float, max_tokens: int,
                stop: Any = ()) -> dict[str, Any]:
    """The request body of the chat route (the completions one is made from it by :func:`send`)."""
    params = {"model": model, "messages": list(messages), "temperature": temperature, "top_p": top_p,
              "max_tokens": max_tokens}
    if stop:
        params["stop"] = list(stop)
    return params


async def send(client: Any, mode: str, params: dict[str, Any], prompt_format: Callable[[str], str] | None = None
               ) -> Any:
    """``params`` (a chat body, :func:`chat_params`) on the route of ``mode`` ("chat" or "completions"): for
    completions the messages become ``prompt`` (:func:`completion_prompt`), every other field the same."""
    if mode == "completions":
        body = {k: v for k, v in params.items() if k != "messages"}
        return await client.completions.create(prompt=completion_prompt(params["messages"], prompt_format), **body)
    return await client.chat.completions.create(**params)


def reply_choice(response: Any) -> tuple[str | None, str | None]:
    """(text, finish_reason) of a reply's first choice, from either route (chat: ``message.content``,
    completions: ``text``); (None, None) without a choice."""
    choices = getattr(response, "choices", None)
    if not choices:
        return None, None
    choice = choices[0]
    message = getattr(choice, "message", None)
    text = message.content if message is not None else getattr(choice, "text", None)
    return text, getattr(choice, "finish_reason", None)


class ModeChooser:
    """The route of one backend: ``configured`` (settings.json's ``mode``) and ``used``, the route its requests
    take now (None: "auto" before any request answered or was refused for want of a chat template).
    ``prompt_format``: how a completions request writes the messages' text (None: exactly)."""

    def __init__(self, configured: str, prompt_format: Callable[[str], str] | None = None):
        self.configured, self.prompt_format = configured, prompt_format
        self.used: str | None = None if configured == "auto" else configured

    @property
    def now(self) -> str:
        """The route the next request takes: chat while "auto" has not decided."""
        return self.used or "chat"

    def label(self) -> str:
        """What a table shows: "chat", "completions", "auto:chat", "auto:completions", or "auto" undecided."""
        if self.configured != "auto":
            return self.configured
        return f"auto:{self.used}" if self.used else "auto"

    async def send(self, client: Any, params: dict[str, Any]) -> tuple[str, Any]:
        """(route, reply) of ``params`` sent on the route in use; "auto" decides here (see the module docstring).
        A failure raises as the client raised it (the chat one where completions did not answer either)."""
        mode = self.now
        try:
            reply = await send(client, mode, params, self.prompt_format)
        except Exception as exc:
            why = no_chat_template(exc) if self.used is None else None
            if why is None:
                raise
            try:  # uvicorn closes the connection after its bare 500: a retry goes on a fresh one, even with none set
                again = client.with_options(max_retries=max(1, client.max_retries)) if why == "bare" else client
                reply = await send(again, "completions", params, self.prompt_format)
            except Exception:
                if why == "named":  # the server said so: completions it is, whatever this request's fate
                    self.used = "completions"
                    raise
                raise exc from None  # a bare 500 that completions did not confirm: the chat failure stands
            self.used = "completions"
            return "completions", reply
        if self.used is None:
            self.used = mode
        return mode, reply
