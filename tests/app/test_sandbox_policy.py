"""The app's sandbox policy: sandboxes only on a loopback address unless the server's environment enables them."""

from __future__ import annotations

import pytest

from ares_viewer_app.serving import sandbox_policy


@pytest.mark.parametrize(
    ("address", "env", "enabled"),
    [("127.0.0.1", {}, True), ("localhost", {}, True), ("::1", {}, True), ("0.0.0.0", {}, False), ("", {}, False),
     ("10.1.2.3", {"ARES_VIEWER_SANDBOX": "1"}, True), ("127.0.0.1", {"ARES_VIEWER_SANDBOX": "0"}, False)],
)
def test_sandbox_is_off_on_public_addresses_unless_enabled(address, env, enabled):
    assert sandbox_policy.sandbox_enabled(address, env) is enabled
