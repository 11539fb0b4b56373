"""One error hierarchy for spadeopt.

Every message names what was involved (app, operator, PE, file), what was expected,
what was found, and what to do. The CLI maps ``SpadeoptError`` to exit code 2 for
bad input and prints the message without a traceback.
"""

from __future__ import annotations


class SpadeoptError(Exception):
    """Root of all errors spadeopt raises on purpose."""

    exit_code = 2


class UsageError(SpadeoptError):
    """A command-line argument or API parameter is invalid."""


class GraphError(SpadeoptError):
    """An application graph is invalid. Carries every problem found, not just the first."""

    def __init__(self, app: str, problems: list[str]) -> None:
        self.app = app
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        n = len(self.problems)
        super().__init__(f"app {app!r} is invalid ({n} problem{'s' if n != 1 else ''}):\n{lines}")


class ArtefactError(UsageError):
    """A build file read back from disk (plan.json, deploy.json, explain.json) holds a
    field spadeopt would not have written. Carries every bad field, each named by its
    JSON path and value."""

    def __init__(self, path: str, what: str, problems: list[str], hint: str) -> None:
        self.path = path
        self.problems = list(problems)
        n = len(self.problems)
        shown = self.problems[:20] + ([f"... {n - 20} more"] if n > 20 else [])
        lines = "\n".join(f"  - {p}" for p in shown)
        super().__init__(f"{path} is not a valid {what} ({n} problem{'s' if n != 1 else ''}); {hint}:\n{lines}")


class PlanError(SpadeoptError):
    """A physical plan (partition + placement) is invalid for its app."""


class CodegenError(SpadeoptError):
    """Generated code failed to render or compile."""


class ProfileError(SpadeoptError):
    """A raw profile, refined profile or calibration file is missing, corrupt or stale."""


class OptimizeError(SpadeoptError):
    """The optimizer cannot produce a plan under the given constraints."""


class PlacementInfeasible(OptimizeError):
    """The PEs do not fit on the declared nodes x cores."""


class EnvironmentProblem(SpadeoptError):
    """Something the machine lacks (Java 17, a writable directory, ...)."""


class RunError(SpadeoptError):
    """A job failed while running: an operator raised, a PE died, Spark aborted."""

    exit_code = 1


class AppError(UsageError):
    """The user's app module failed to import, or its builder raised."""


def user_failure(exc: BaseException, what: str) -> AppError:
    """An ``AppError`` for an exception raised by the user's own code.

    The message points at the user's file and line and carries the exception's message
    and a short traceback of the user's own frames (never spadeopt's or importlib's).
    """
    import traceback
    from pathlib import Path

    ours = str(Path(__file__).resolve().parent)
    if isinstance(exc, SyntaxError) and exc.filename and not str(exc.filename).startswith(ours):
        where = f"{exc.filename}, line {exc.lineno}"
        text = f"\n    {exc.text.rstrip()}" if exc.text else ""
        return AppError(f"{what}: {type(exc).__name__} in {where}: {exc.msg}{text}")
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(ours) and not f.filename.startswith("<frozen")]
    head = f"{what}: {type(exc).__name__}: {exc}"
    if frames:
        last = frames[-1]
        head = f"{what}: {type(exc).__name__} in {last.filename}, line {last.lineno}: {exc}"
        shown = "".join(traceback.format_list(frames[-5:])).rstrip()
        head += f"\n  traceback (your code, most recent call last):\n{shown}"
    return AppError(head)
