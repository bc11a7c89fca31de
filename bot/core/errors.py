"""Errors a user can act on: each names the input and the problem in one line."""


class PitcrewError(Exception):
    """Base for errors reported to the user as one line, exit status 2."""


class TransientError(PitcrewError):
    """The other side could not serve a request now (down, busy, rate limited): the same
    request may succeed later, after `retry_after` seconds when it said how long."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class HeldError(TransientError):
    """The other side will take the request once a person acts (the bot invited to a chat
    channel): retried with back-off for as long as it takes, holding nothing else back,
    and said where an operator looks (`pitcrew status`)."""


class PermanentError(PitcrewError):
    """The other side refused a request for good (an unknown channel, a revoked token):
    the same request will never succeed, so it is given up rather than retried."""


class InputError(PitcrewError):
    """An input to `pitcrew diagnose` cannot be read or understood."""


class PlaybookError(PitcrewError):
    """A playbook file is invalid; the message names file, line or field, and reason."""

    def __init__(self, source: str, where: str, reason: str) -> None:
        self.source = source
        self.where = where
        self.reason = reason
        location = f"{source}:{where}" if where else source
        super().__init__(f"{location}: {reason}")


class StoreError(PitcrewError):
    """The state database cannot be opened or used; the message names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")

    def __reduce__(self) -> tuple[type[PitcrewError], tuple[str, str]]:
        return (type(self), (self.path, self.problem))


class StaleTermError(StoreError):
    """A write made under a leader's term older than the newest one the store recorded:
    another replica leads now, and nothing of the write was kept (fencing:
    `bot.daemon.ports.Fenced`)."""


class ActionRefusedError(PitcrewError):
    """An executor did not apply an action because it is no longer safe, no longer needed
    or its target changed; nothing was changed. The message says why."""


class ActionFailedError(PitcrewError):
    """An executor attempted an action and it did not achieve its effect (the API server
    did not accept or keep the change, a remediation job failed)."""
