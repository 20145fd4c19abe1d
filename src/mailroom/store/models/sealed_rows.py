"""ORM rows holding sealed values: opened as they load, sealed again before a flush writes them.

A model whose rows may hold values sealed under their owner's data key (a
``sealed`` column says which rows do) registers here once, naming its opener
and its sealer as ``"module:function"``. They are imported on first use, so
loading the models never loads the crypto layer:

* ``open(row, session, attrs)`` opens a sealed row in place as it loads, or
  the ``attrs`` of it being refreshed (all when None);
* ``seal(session, rows)`` seals the changed sealed columns of dirty sealed rows
  before a flush (:func:`reseal_changed` does the bookkeeping) and returns
  ``(row, column, clear value)`` for each, which are put back once the flush has
  written the sealed ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from mailroom.store.models.base import Base


def _function(path: str) -> Callable[..., Any]:
    module, name = path.split(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return found


def open_as_loaded(model: type[Base], opener: str) -> None:
    """Open ``model``'s sealed rows as they load or refresh, with ``opener``."""

    @event.listens_for(model, "load")
    def _open_on_load(target: Any, context: Any) -> None:
        if target.__dict__.get("sealed"):
            _function(opener)(target, context.session, None)

    @event.listens_for(model, "refresh")
    def _open_on_refresh(target: Any, context: Any, attrs: Any) -> None:
        if target.__dict__.get("sealed"):
            _function(opener)(target, context.session, attrs)


def seal_before_flush(model: type[Base], sealer: str) -> None:
    """Seal the changed columns of ``model``'s sealed rows before each flush, with ``sealer``."""
    replaced = f"mailroom.resealed.{model.__tablename__}"

    @event.listens_for(Session, "before_flush")
    def _seal_before_flush(session: Session, _context: Any, _instances: Any) -> None:
        changed = [o for o in session.dirty if isinstance(o, model) and o.__dict__.get("sealed")]
        if changed:
            session.info[replaced] = _function(sealer)(session, changed)

    @event.listens_for(Session, "after_flush_postexec")
    def _clear_after_flush(session: Session, _context: Any) -> None:
        from sqlalchemy.orm.attributes import set_committed_value

        for row, column, clear in session.info.pop(replaced, ()):
            set_committed_value(row, column, clear)


def reseal_changed(
    rows: Iterable[Any],
    columns: Sequence[str],
    seal: Callable[[Any, dict[str, Any]], Mapping[str, Any]],
) -> list[tuple[Any, str, Any]]:
    """Put sealed values in place of the changed ``columns`` of each stored sealed row.

    ``seal(row, changed)`` gets the row's changed columns with their clear values and
    returns them sealed. Returns ``(row, column, clear value)`` of each replaced value.
    """
    from sqlalchemy import inspect

    replaced: list[tuple[Any, str, Any]] = []
    for row in rows:
        if not row.sealed or row.id is None:
            continue
        state = inspect(row)
        changed = {c: getattr(row, c) for c in columns if state.attrs[c].history.has_changes()}
        if not changed:
            continue
        for column, sealed in seal(row, changed).items():
            replaced.append((row, column, changed[column]))
            setattr(row, column, sealed)
    return replaced
