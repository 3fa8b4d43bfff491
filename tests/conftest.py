"""Shared fixtures: real Docker engine and real Chromium, failing in CI when missing."""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import pathlib
import sys
import threading
import types

import pytest

from ares_viewer import sandbox
from ares_viewer.runs import run

REPO = pathlib.Path(__file__).resolve().parent.parent
SAMPLE_RUNS = REPO / "sample_runs"
DEMO_RUN = SAMPLE_RUNS / "demo-run"
BASE_IMAGE = "ares-viewer/sample-base:1"
CHROMIUM = pathlib.Path(os.environ.get("ARES_VIEWER_CHROMIUM", "/usr/bin/chromium"))


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _missing(reason: str) -> None:
    """Fail in CI (the tests must run there), skip with a one-line reason elsewhere."""
    if _in_ci():
        pytest.fail(f"required in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def missing():
    """``missing(reason)``: fail in CI, skip elsewhere; for needs that are no fixture of their own (a package)."""
    return _missing


@pytest.fixture(scope="session")
def installed():
    """``installed(module, how)``: the module imported, else ``missing`` naming ``how`` to install it."""

    def need(module: str, how: str) -> types.ModuleType:
        try:
            return importlib.import_module(module)
        except ImportError as exc:
            _missing(f"{module} is not installed ({exc}); {how}")
            raise

    return need


@pytest.fixture(scope="session")
def big_run(tmp_path_factory):
    """``(runs, cache)``: a folder holding ``big``, a generated Tinker run of 200,000 rollouts, and an index cache
    for it, shared by the tests of what a large run costs."""
    from benchmarks import bench_scale

    root = tmp_path_factory.mktemp("runs")
    bench_scale.write_run(root / "big", 200_000)
    return root, tmp_path_factory.mktemp("cache")


@pytest.fixture
def no_whole_table(monkeypatch):
    """Loading a run's whole episode table (``Run.episodes``) fails the test."""
    from ares_viewer.runs.index import table

    def whole_table(self):
        raise AssertionError("the run's whole episode table was loaded")

    monkeypatch.setattr(table.EpisodeTable, "frame", whole_table)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own index cache, so no test sees another's cached rows."""
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(autouse=True)
def _one_component_scan():
    """Streamlit's scan of every installed distribution for custom components, done once per session as a server
    does it once per process: each new ``AppTest`` scans again (0.4-0.8 s of reading ~220 packages' metadata, most
    of a page's run; hundreds of AppTests a session), and the installed packages do not change during a session.
    Patched once the app's tests have imported Streamlit; a session that never does is left alone."""
    if "streamlit" not in sys.modules:
        return
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # a Streamlit without it scans nothing
        return
    scan = getattr(manifest_scanner, "scan_component_manifests", None)
    if scan is None or getattr(scan, "once", False):
        return
    found: list = []

    def scan_once(max_workers=None):
        if not found:
            found.append(scan(max_workers))
        return list(found[0])

    scan_once.once = True  # type: ignore[attr-defined]
    manifest_scanner.scan_component_manifests = scan_once


def _connect_docker():
    """A client of a real Docker engine (``missing`` when none answers)."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # any failure to reach the engine
        _missing(f"no Docker engine reachable ({type(exc).__name__}: {exc})")
    return client


@pytest.fixture(scope="session")
def docker_client():
    """A client of a real Docker engine."""
    return _connect_docker()


@pytest.fixture(scope="module")
def engine(docker_client, request):
    """The real engine with the sample base image, for a module that names its sandboxes ``SESSION``: every
    container of that session is removed at the end of the module, even after failures."""
    session = request.module.SESSION
    docker_client.images.get(BASE_IMAGE)
    yield docker_client
    sandbox.cleanup(docker_client, session=session)
    assert not sandbox.list_sandboxes(docker_client, session=session)


@pytest.fixture
def restore(engine, request):
    """``restore(episode_id, step, folder=sample_runs/demo-run, **options)``: a sandbox of the module's session,
    removed after the test."""
    made = []

    def make(episode_id: str, step: int, folder: pathlib.Path = DEMO_RUN, **options):
        options.setdefault("session", request.module.SESSION)
        box = sandbox.restore(run.load_episode(folder / f"{episode_id}.json"), step, client=engine, **options)
        made.append(box)
        return box

    yield make
    for box in made:
        box.remove()


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Path of Debian's Chromium, checked to exist."""
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} not found (apt-get install chromium)")
    return str(CHROMIUM)


_SANDBOX_ENTRY = '''
import streamlit as st
from ares_viewer_app.panels import choosers
from ares_viewer_app.routing import pages, state
state.sync_from_url()
page = st.navigation([st.Page(pages.path("sandbox"), title="Sandbox", url_path="sandbox", default=True)])
choosers.run_picker()
page.run()
'''


@pytest.fixture
def sandbox_page(tmp_path, monkeypatch):
    """``sandbox_page(runs_root, **query)``: the app's Sandbox page as an AppTest, on the runs under ``runs_root``."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    def make(runs_root: pathlib.Path, **query: str) -> AppTest:
        st.cache_resource.clear()
        monkeypatch.setenv("ARES_VIEWER_RUNS", str(runs_root))
        entry = tmp_path / "sandbox_entry.py"
        entry.write_text(_SANDBOX_ENTRY)
        at = AppTest.from_file(str(entry), default_timeout=60)
        at.query_params.update(query)
        return at

    return make


@pytest.fixture
def s3_server(monkeypatch):
    """An S3 API on 127.0.0.1 (moto's server mode) with a bucket ``runs``; s3fs, boto3 and Ray workers reach it
    through the environment. Returns its endpoint URL."""
    import contextlib
    import logging
    import socket
    import urllib.request

    try:
        import boto3
        import s3fs  # what fsspec uses for s3://
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        _missing(f"moto[server], boto3 and s3fs are needed ({exc})")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
                       "FSSPEC_S3_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(key, value)
    # moto keeps its buckets in the process, not in the server: an earlier test's files would still be there
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=30).close()
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="runs")
    # fsspec keeps one S3 filesystem per set of arguments, made with the endpoint of its day: an earlier test's
    # server would be asked again, and it is gone
    s3fs.S3FileSystem.clear_instance_cache()
    yield endpoint
    s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


@pytest.fixture
def ray_available() -> None:
    """Ray with Ray Data, installed (the test extra has it)."""
    try:
        import ray.data  # noqa: F401
    except ImportError as exc:
        _missing(f"Ray is not installed: pip install 'ray[data]' ({exc})")


_ONCE_LOCK = threading.Lock()
_ONCE: dict[str, concurrent.futures.Future] = {}


def _once(key: str, compute):
    """``compute()``'s result (or what it raised, a skip or a failure too), computed once per process whichever
    thread asks first; the others wait for it."""
    with _ONCE_LOCK:
        future = _ONCE.get(key)
        first = future is None
        if first:
            future = _ONCE[key] = concurrent.futures.Future()
    if first:
        try:
            future.set_result(compute())
        except BaseException as exc:  # pytest's skip and fail outcomes are BaseExceptions
            future.set_exception(exc)
    return future.result()


def _find_ares_python(env: dict[str, str] | None = None) -> str:
    """The ARES venv's Python, built when missing and checked to import ARES (``missing`` otherwise); ``env``: the
    environment to check it in (this process's by default)."""
    import subprocess

    try:
        built = subprocess.run(
            ["bash", str(REPO / ".ci" / "ares-venv.sh")], capture_output=True, text=True, timeout=1800, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _missing(f"cannot build the ARES venv ({type(exc).__name__}: {exc})")
    if built.returncode != 0:
        _missing(f"no ARES venv: .ci/ares-venv.sh failed: {built.stderr.strip()[-400:]}")
    python = built.stdout.strip().splitlines()[-1]
    probe = "from ares_viewer import recorder; recorder.use_local_harbor_registry(); import ares"
    check = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                           env={**(env or os.environ), "PYTHONPATH": str(REPO)}, timeout=300, check=False)
    if check.returncode != 0:
        _missing(f"ARES does not import in {python}: {check.stderr.strip()[-400:]}")
    return python


@pytest.fixture(scope="session")
def ares_python() -> str:
    """The Python of the ARES venv (martian-ares needs Python >= 3.12), built by .ci/ares-venv.sh when missing."""
    return _once("ares_python", _find_ares_python)


@pytest.fixture(scope="session")
def mini_swe_agent_runs(tmp_path_factory, docker_client, missing) -> types.SimpleNamespace:
    """Every scenario the real mini-swe-agent writes (text and tool calls, a timeout, a format error, an exception,
    the step limit), generated once per session: ``folder`` and ``files`` (scenario name -> file)."""
    try:
        import minisweagent  # noqa: F401
    except ImportError as exc:
        missing(f"mini-swe-agent is not installed ({exc}); pip install -e '.[test]'")
    try:
        docker_client.images.get("ares-viewer/sample-base:1")
    except Exception as exc:  # the image is built by images/build-base.sh
        missing(f"image ares-viewer/sample-base:1 missing ({type(exc).__name__}); run images/build-base.sh")
    from producers import mini_swe_agent_runs as producer
    folder = tmp_path_factory.mktemp("mini-runs")
    return types.SimpleNamespace(folder=folder, files=producer.generate(folder))


@pytest.fixture(scope="session")
def torch():
    """torch, which the activation tests use to write ``.pt`` files and to check the torch-free reader."""
    try:
        import torch
    except ImportError:
        _missing("torch is not installed (pip install torch==2.13.0: the CPU build)")
    return torch


def _find_interp_python() -> str:
    """The interp venv's Python, built when missing (``missing`` otherwise)."""
    import subprocess

    try:
        built = subprocess.run(["bash", str(REPO / ".ci" / "interp-venv.sh")], capture_output=True, text=True,
                               timeout=2400, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _missing(f"cannot build the interp venv ({type(exc).__name__}: {exc})")
    if built.returncode != 0:
        _missing(f"no interp venv: .ci/interp-venv.sh failed: {built.stderr.strip()[-400:]}")
    return built.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def interp_python() -> str:
    """The Python of the interp venv (ARES, TransformerLens, torch), built by .ci/interp-venv.sh when missing."""
    return _once("interp_python", _find_interp_python)


def _record_interp(python: str, client, root: pathlib.Path, env: dict[str, str]) -> types.SimpleNamespace:
    """``interp_run``'s recording into ``root``, its leftover containers removed."""
    import json
    import subprocess
    import uuid

    client.images.get(BASE_IMAGE)
    prefix = f"avrun{uuid.uuid4().hex[:8]}"
    try:
        done = subprocess.run(
            [python, str(REPO / "testdata" / "ares_capture.py"), "--out", str(root / "interp-run"), "--steps",
             "3", "--prefix", prefix, "--episode", "kv-episode", "--episode", "full-episode:no-kv-cache",
             "--episode", "left-episode:left"],
            capture_output=True, text=True, timeout=900, check=False, env={**env, "PYTHONPATH": str(REPO)})
    finally:
        for leftover in client.containers.list(all=True, filters={"name": f"ares.{prefix}."}):
            leftover.remove(force=True)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {r["episode_id"]: r for r in map(json.loads, (line for line in done.stdout.splitlines()
                                                            if line.startswith("{")))}
    return types.SimpleNamespace(root=root, run=root / "interp-run", results=results)


@pytest.fixture(scope="session")
def interp_run(interp_python, docker_client, tmp_path_factory, _early) -> types.SimpleNamespace:
    """A run recorded through real ARES with its activations (``testdata/ares_capture.py``: a random-weight
    HookedTransformer behind ARES's client, 3 steps): ``kv-episode`` (ARES's default KV cache) and
    ``full-episode`` (every position), and ``left-episode`` (its tokenizer cuts a long prompt's start), once per
    session. ``root`` holds the run folder ``interp-run``; ``results``
    maps each episode id to the script's JSON line. Started at the session's start (``_early``)."""
    if "interp_run" in _early:
        return _early["interp_run"].result()
    return _record_interp(interp_python, docker_client, tmp_path_factory.mktemp("interp-runs"), dict(os.environ))


PLANTED_RUN = "planted-suite"


def _record_planted(python: str, client, root: pathlib.Path, suite, env: dict[str, str]) -> types.SimpleNamespace:
    """``planted_suite``'s recording, into ``root``: the script through ARES, its leftover containers removed."""
    import json
    import subprocess
    import uuid

    client.images.get(BASE_IMAGE)
    out = root / PLANTED_RUN
    prefix = f"avplanted{uuid.uuid4().hex[:6]}"
    try:
        done = subprocess.run(
            [python, str(SAMPLE_RUNS / "planted_suite.py"), "--out", str(out), "--only", ",".join(suite.SMALL),
             "--jobs", str(len(suite.SMALL)), "--prefix", prefix],
            capture_output=True, text=True, timeout=1200, env={**env, "PYTHONPATH": str(REPO)}, check=False,
        )
    finally:
        for leftover in client.containers.list(all=True, filters={"name": f"ares.{prefix}."}):
            leftover.remove(force=True)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / suite.MANIFEST).read_text())
    entries = {entry["name"]: entry for entry in manifest["episodes"]}
    return types.SimpleNamespace(root=root, run=out, entries=entries, suite=suite)


def _search_planted(recorded: types.SimpleNamespace, cache: pathlib.Path, env: dict[str, str]) -> types.SimpleNamespace:
    """``searched_planted_suite``'s search of ``recorded``'s run, its branches in ``cache``."""
    import subprocess

    import chat_server

    suite = recorded.suite
    before = tree_digest(recorded.run)
    policy = suite.Policy(seed=3, recover=0.0, profiles=suite.profiles_of(suite.SMALL))
    with chat_server.serve(policy) as server:
        done = subprocess.run(
            [sys.executable, "-m", "ares_viewer.cli", "branch", str(recorded.run), "--episodes", "failed",
             "--endpoint", server.base_url, "--model", suite.RUN_MODEL, "--samples", "4", "--max-steps",
             str(suite.MAX_STEPS), "--parallel", "2", "--max-rollouts", "40", "--no-snapshots", "--json"],
            capture_output=True, text=True, timeout=1800, check=False,
            env={**env, "PYTHONPATH": str(REPO), "ARES_VIEWER_CACHE": str(cache)},
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return types.SimpleNamespace(cache=cache, done=done, untouched=tree_digest(recorded.run) == before,
                                 **vars(recorded))


# The slowest session fixtures, nearly all of their time spent waiting on containers: started in the background
# when the session needs them (``_early``), in the order the session first asks for them.
_EARLY_FIXTURES = {"interp_run": ("interp_run",), "planted": ("planted_suite", "searched_planted_suite")}


# Fixtures that tests of several modules share and that must not run twice at once: under pytest-xdist, the tests
# that use one of them run on one worker. The session fixtures' work is costly and so done once; the tests that
# start a local Ray cluster run one at a time. (A branch once lost its containers with the Ray modules side by side;
# the likely cause was an app test's cleanup, which removed every new sandbox of the parent episode whoever made it,
# and now leaves the test modules' own sessions alone: ``app_sandboxes``. The grouping costs little and stays.)
_SHARED_FIXTURES = {**_EARLY_FIXTURES, "mini-swe-agent": ("mini_swe_agent_runs",), "big-run": ("big_run",),
                    "ray": ("ray_available",)}


def _xdist_worker(config) -> bool:
    """Whether this process is a pytest-xdist worker."""
    return hasattr(config, "workerinput")


def _group(item) -> str:
    """The xdist group of ``item``: the shared session fixture it uses, else ``browser`` for a browser test (they
    share one app server per worker, and run in the order of a one-process run: in another order, a flag picker
    once failed to appear), else its module."""
    names = set(getattr(item, "fixturenames", ()))
    for group, fixtures in _SHARED_FIXTURES.items():
        if names.intersection(fixtures):
            return group
    module = item.nodeid.split("::", 1)[0]
    return "browser" if module.startswith("tests/browser/") else module


# The most workers ``-n auto`` starts: each may hold a Streamlit server, Chromium, a Ray cluster or ARES at once.
_MOST_WORKERS = 4


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (``pyproject.toml``'s addopts): one worker per core, at most ``_MOST_WORKERS``."""
    return max(1, min(os.cpu_count() or 1, _MOST_WORKERS))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n``, with ``--dist loadgroup``), each module's tests run on one worker (its module
    fixtures, Docker sessions and servers are made once), and so do the tests that share a fixture of
    ``_SHARED_FIXTURES``."""
    if not _xdist_worker(config):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))


def _first_needs(items) -> list[str]:
    """The ``_EARLY_FIXTURES`` jobs some of ``items`` need, by the first item that needs each."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        names = set(getattr(item, "fixturenames", ()))
        for job, fixtures in _EARLY_FIXTURES.items():
            if job not in first and names.intersection(fixtures):
                first[job] = index
    return sorted(first, key=first.__getitem__)


@pytest.fixture(scope="session", autouse=True)
def _early(request, tmp_path_factory):
    """The slowest session fixtures' work, started in one thread at the session's start when the session has a
    test that needs them: ``interp_run`` (ARES recording activations, ~30 s) and the planted suite
    (``planted_suite`` and ``searched_planted_suite``: ARES recording four episodes, then the run-wide search, ~80
    s), so that they run beside the first tests (the app's, on one core) instead of holding up the first test that
    asks (not under pytest-xdist: there the other workers go on meanwhile). Those fixtures wait for the same work
    and give the same values; a failure (no venv, no engine, a failed recording or search) is raised there, in that
    test, as before. Futures by name; those not started are absent and their fixtures do the work themselves."""
    # Under pytest-xdist, every worker collects every test and cannot know which it will run: the fixtures do their
    # own work, on the one worker their group runs on, beside the other workers.
    jobs = [] if _xdist_worker(request.config) else _first_needs(request.session.items)
    if not jobs:
        yield {}
        return
    import chat_server  # noqa: F401 - imported here, not in the thread (a module half imported is not shared)
    import sample_scripts

    suite = sample_scripts.load("planted_suite")
    env = dict(os.environ)  # the environment as the session started, not as a test beside the thread sets it
    roots = {"interp": tmp_path_factory.mktemp("interp-runs"), "planted": tmp_path_factory.mktemp("planted-runs"),
             "cache": tmp_path_factory.mktemp("planted-cache")}
    names = {"interp_run": ["interp_run"], "planted": ["recorded", "searched"]}
    futures = {name: concurrent.futures.Future() for job in jobs for name in names[job]}

    def interp() -> None:
        python = _once("interp_python", _find_interp_python)
        futures["interp_run"].set_result(_record_interp(python, _connect_docker(), roots["interp"], env))

    def planted() -> None:
        python = _once("ares_python", lambda: _find_ares_python(env))
        futures["recorded"].set_result(_record_planted(python, _connect_docker(), roots["planted"], suite, env))
        futures["searched"].set_result(_search_planted(futures["recorded"].result(), roots["cache"], env))

    def work() -> None:
        for job in jobs:
            try:
                {"interp_run": interp, "planted": planted}[job]()
            except BaseException as exc:  # pytest's skip and fail outcomes are BaseExceptions
                for name in names[job]:
                    if not futures[name].done():
                        futures[name].set_exception(exc)

    thread = threading.Thread(target=work, name="early-fixtures")  # not a daemon: it removes its containers
    thread.start()
    yield futures
    thread.join()


@pytest.fixture(scope="session")
def planted_suite(ares_python, docker_client, tmp_path_factory, _early) -> types.SimpleNamespace:
    """The small part of the planted suite (``sample_runs/planted_suite.py``'s ``SMALL``), recorded once per session
    through real ARES by that script, so CI measures every change to the search on fresh recordings: ``root`` (a
    runs folder, for the app), ``run`` (``root / "planted-suite"``, the run folder), ``entries`` (the manifest's
    entries by episode name) and ``suite`` (the script as a module). Nothing may write into ``run``: a search
    stores its branches in the cache folder. Started at the session's start (``_early``)."""
    if "recorded" in _early:
        return _early["recorded"].result()
    import sample_scripts

    return _record_planted(ares_python, docker_client, tmp_path_factory.mktemp("planted-runs"),
                           sample_scripts.load("planted_suite"), dict(os.environ))


def tree_digest(folder: pathlib.Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time (to check nothing wrote into it)."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def searched_planted_suite(planted_suite, tmp_path_factory, _early) -> types.SimpleNamespace:
    """``ares-viewer branch RUN --episodes failed`` run once per session on ``planted_suite``'s run (the real CLI in
    a subprocess; the suite's policy over HTTP with ``recover=0``, one model for the run; without per-step
    snapshots): ``cache`` (the cache folder holding its branches, for the app and ``--report``), ``done`` (the
    finished process, which succeeded; its stdout is the command's JSON), ``run``, ``root``, ``entries``, ``suite`` and
    ``untouched`` (whether the run folder's files are as recorded after the search). Started at the session's
    start (``_early``)."""
    if "searched" in _early:
        return _early["searched"].result()
    return _search_planted(planted_suite, tmp_path_factory.mktemp("planted-cache"), dict(os.environ))


def pytest_sessionfinish(session, exitstatus):
    """Let go of the runs the app's caches hold (tests that run pages with AppTest), so their DuckDB connections
    close before the interpreter ends (else DuckDB's bindings list each one as leaked at exit, over the report)."""
    import gc
    import sys

    if "streamlit" in sys.modules:
        import streamlit as st

        st.cache_resource.clear()
    gc.collect()
