"""How the app is served and what a served app may do: the server (``server``, ``served``), what an exposed
server reads (``access``), whether it runs sandboxes (``sandbox_policy``) and the thread that stops idle ones
(``sandbox_reaper``)."""
