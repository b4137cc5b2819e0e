"""The recent results of expensive functions, shared by every session (``Recent``): the Attention tab keeps its
analyses here, so that a class looking at one example computes it once."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable


class Recent:
    """The last `size` results of an expensive function, shared by every session: forty students looking at
    the same example compute it once and hold one copy between them, not one each. A result is kept with
    the object it was computed from (e.g. a model), matched by identity: a key naming an object by id() can
    never hand out the result of another object that took its id. max_bytes (with nbytes, a result's size) bounds
    what is kept in bytes too: 32 analyses of 256-token sentences held 300 MB after their sessions were gone."""

    def __init__(self, size: int, max_bytes: int | None = None, nbytes: Callable[[Any], int] = lambda value: 0):
        self.size, self.max_bytes, self._nbytes = size, max_bytes, nbytes
        self._items: OrderedDict[Hashable, tuple[Any, Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, source: Any, make: Callable[[], Any]) -> Any:
        """make()'s result for key, computed from source; made now unless one is kept."""
        with self._lock:
            kept = self._items.get(key)
            if kept is not None and kept[0] is source:
                self._items.move_to_end(key)
                return kept[1]
        value = make()
        with self._lock:
            self._items[key] = (source, value, self._nbytes(value))
            self._items.move_to_end(key)
            while len(self._items) > self.size or (len(self._items) > 1 and self._over_bytes()):
                self._items.popitem(last=False)
        return value

    def _over_bytes(self) -> bool:
        return self.max_bytes is not None and sum(n for _, _, n in self._items.values()) > self.max_bytes
