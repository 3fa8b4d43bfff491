"""The one bounded cache every module uses for its state."""

from __future__ import annotations

import threading
import time

from ares_viewer.base.cache import BoundedCache


def test_a_full_cache_evicts_the_least_recently_used_entry():
    cache = BoundedCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recently used
    cache.put("c", 3)
    assert "b" not in cache
    assert cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2


def test_entries_expire_after_their_ttl():
    cache = BoundedCache(maxsize=4, ttl=0.05)
    cache.put("k", "v")
    assert cache.get("k") == "v"
    time.sleep(0.08)
    assert cache.get("k") is None


def test_get_or_compute_computes_once_per_key():
    cache = BoundedCache(maxsize=4)
    calls = []
    for _ in range(3):
        assert cache.get_or_compute("x", lambda: calls.append(1) or 42) == 42
    assert calls == [1]


def test_threads_share_one_cache_without_losing_the_bound():
    cache = BoundedCache(maxsize=50)

    def work(offset: int) -> None:
        for i in range(2000):
            cache.put((offset, i), i)
            cache.get((offset, i - 1))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 50
