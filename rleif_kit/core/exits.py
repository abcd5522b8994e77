"""What the commands' exit statuses mean, and the error an endpoint's refusal raises (docs/cli.md).

0 done; 1 ``rleif doctor`` found a fail; 2 a user error (a bad config or input, an output directory another run
holds, a stage that failed); 3, 4 and 5 below; 130 interrupted.
"""

from __future__ import annotations

# the endpoint rejected the requests (401 / 403 / 404, or a 400 / 404 / 422 naming an unknown model:
# llm/errors.names_unknown_model): fix the key or the model name
EXIT_REJECTED = 3
EXIT_STOPPED = 4  # stopped early on purpose (a max_requests / max_cost budget) or with items pending: rerun
EXIT_DISK_FULL = 5  # a write ran out of space (core/disk.py): free some and rerun, the stage resumes

BUDGET_PREFIX = "budget:"
REJECTED_PREFIX = "endpoint rejected the request"


class StageIncomplete(RuntimeError):
    """A stage ended with work left that a rerun continues (too many requests failed, items pending): exit 4,
    no done marker. ``rleif run`` reports the stage "stopped", not "failed"."""

    exit_code = EXIT_STOPPED


class DiskFull(RuntimeError):
    """A write ran out of space: one line naming the path, the free space there and, when known, the space needed
    (``core.disk.writing``). Exit 5; what was written before stays, and a rerun resumes once space is freed."""

    exit_code = EXIT_DISK_FULL


class EndpointRejected(RuntimeError):
    """The endpoint refused the requests (authentication, permission, unknown model): nothing more was sent."""


def rejected_error(stopped_reason: str) -> EndpointRejected:
    return EndpointRejected(f"{stopped_reason}; nothing more was sent. Check the key's environment variable and "
                            "the model name in settings.json (rleif check-api tries each endpoint)")


