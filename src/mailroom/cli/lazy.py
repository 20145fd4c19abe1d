"""A click group whose commands are imported only when they run.

``mailroom list`` must not pay for the web server, the job queues, IMAP or the
cipher library, which together made every read command take most of a second;
so each command's module is imported when that command is looked up. ``mailroom
--help`` lists every command with its one-line summary: that summary is read
from the docstring in the module's source (``ast``), not by importing all the
command modules (which took 0.8 s, more than any read command).
"""

from __future__ import annotations

import ast
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeGuard

import click

# A decorator argument that changes what --help shows: such a command is imported to ask it.
_HELP_ARGUMENTS = frozenset({"help", "short_help", "hidden", "deprecated"})


def source_help(target: str) -> str | None:
    """The help text of the command ``module:function``, from its source without importing it.

    The function's docstring, as click takes it; None when the help comes from
    elsewhere (a ``help=``/``short_help=``/``hidden=``/``deprecated=`` argument,
    no such function, no source): the caller then imports the command.
    """
    module_name, attribute = target.split(":")
    spec = find_spec(module_name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attribute:
            for decorator in node.decorator_list:
                if _makes_command(decorator) and any(
                    keyword.arg in _HELP_ARGUMENTS for keyword in decorator.keywords
                ):
                    return None
            return ast.get_docstring(node)
    return None


def _makes_command(decorator: ast.expr) -> TypeGuard[ast.Call]:
    """Whether a decorator is ``click.command(...)``/``click.group(...)``/``group.command(...)``."""
    return (
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Attribute)
        and decorator.func.attr in ("command", "group")
    )


class LazyGroup(click.Group):
    """A group that imports a command's module only when the command is looked up."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, without importing any command module."""
        return sorted({*self.lazy, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, importing its module on first use; None for an unknown name."""
        if cmd_name in self.commands or cmd_name not in self.lazy:
            return self.commands.get(cmd_name)
        module_name, attribute = self.lazy[cmd_name].split(":")
        command = getattr(import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
        self.commands[cmd_name] = command
        return command

    def summary_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """What --help lists for ``cmd_name``: the command if loaded, else a stand-in.

        The stand-in carries the help read from the source, so click shortens it
        to the same one line as the real command's.
        """
        if cmd_name not in self.commands and cmd_name in self.lazy:
            help_text = source_help(self.lazy[cmd_name])
            if help_text is not None:
                return click.Command(cmd_name, help=help_text)
        return self.get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of --help, as click writes it, without importing the commands."""
        commands = [
            (name, command)
            for name in self.list_commands(ctx)
            if (command := self.summary_command(ctx, name)) is not None and not command.hidden
        ]
        if not commands:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in commands)
        with formatter.section("Commands"):
            formatter.write_dl(
                [(name, command.get_short_help_str(limit)) for name, command in commands]
            )
