"""spadeopt: a profile-driven fusion and placement compiler for Python stream apps."""

from spadeopt.frontend.dsl import App, AppSpec, app, count_window, time_window

__all__ = ["App", "AppSpec", "app", "count_window", "time_window"]
__version__ = "0.1.0"
