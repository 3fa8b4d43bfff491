"""``ares-viewer sandbox``: the project's live containers (restored steps): list them, or remove them."""

from __future__ import annotations

import argparse
import sys

import orjson

from ares_viewer import sandbox
from ares_viewer.base.durations import parse_duration


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``sandbox`` command, with ``list`` and ``cleanup``, among ``commands``."""
    box = commands.add_parser("sandbox", help="the project's live containers (restored steps)")
    box_commands = box.add_subparsers(dest="sandbox_command", required=True)
    box_list = box_commands.add_parser("list", help="list every ares-viewer container, found by label")
    box_list.add_argument("--session", help="only this session's containers")
    box_list.add_argument("--json", action="store_true", help="one JSON object per line")
    box_list.set_defaults(func=list_containers)
    box_cleanup = box_commands.add_parser("cleanup", help="remove ares-viewer containers")
    box_cleanup.add_argument("--older-than", metavar="AGE", help="only those older than AGE (90s, 30m, 2h, 1d)")
    box_cleanup.add_argument("--session", help="only this session's containers")
    box_cleanup.set_defaults(func=cleanup)


def list_containers(args: argparse.Namespace) -> int:
    found = sandbox.list_sandboxes(session=args.session)
    if args.json:
        for info in found:
            print(orjson.dumps({"id": info.container_id, "name": info.name, "image": info.image, "state": info.state,
                                "role": info.role, "episode_id": info.episode_id, "step": info.step,
                                "session": info.session, "created_at": info.created_at,
                                "age_s": round(info.age_s(), 1)}).decode())
        return 0
    if not found:
        print("no ares-viewer containers", file=sys.stderr)
        return 0
    print(f"{'ID':<12}  {'STATE':<8}  {'ROLE':<12}  {'AGE':>7}  {'SESSION':<16}  {'STEP':>4}  EPISODE")
    for info in found:
        print(f"{info.short_id:<12}  {info.state:<8}  {info.role or '-':<12}  {info.age_s():>6.0f}s  "
              f"{info.session or '-':<16}  {info.step if info.step is not None else '-':>4}  {info.episode_id or '-'}")
    return 0


def cleanup(args: argparse.Namespace) -> int:
    older = parse_duration(args.older_than) if args.older_than else None
    removed = sandbox.cleanup(older_than_s=older, session=args.session)
    for container_id in removed:
        print(container_id[:12])
    print(f"removed {len(removed)} container(s)", file=sys.stderr)
    return 0
