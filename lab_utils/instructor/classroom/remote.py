"""Run code in a kernel of a learner's own server, through the hub's proxy: the server's kernels API and the kernel's
websocket (Jupyter's JSON messages). What runs is a child of the learner's server, so inside the learner's cgroup."""
from __future__ import annotations

import asyncio
import json
import uuid

from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from .hub import Api


def _message(code: str, session: str) -> dict:
    msg_id = uuid.uuid4().hex
    return {"header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "", "session": session,
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}


async def _execute(ws_url: str, token: str, code: str, timeout: float) -> str:
    request = HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}, connect_timeout=30, request_timeout=30)
    conn = await websocket_connect(request)
    try:
        message = _message(code, uuid.uuid4().hex)
        await conn.write_message(json.dumps(message))
        out: list[str] = []
        async with asyncio.timeout(timeout):
            while True:
                raw = await conn.read_message()
                if raw is None:
                    raise RuntimeError("the kernel's websocket closed before the code finished")
                reply = json.loads(raw)
                if reply.get("parent_header", {}).get("msg_id") != message["header"]["msg_id"]:
                    continue
                kind, content = reply["msg_type"], reply["content"]
                if kind == "stream":
                    out.append(content["text"])
                elif kind == "error":
                    raise RuntimeError(f"the code raised {content['ename']}: {content['evalue']}\n" + "".join(out))
                elif kind == "status" and content["execution_state"] == "idle":
                    return "".join(out)
    finally:
        conn.close()


def run_code(hub_url: str, user: str, token: str, code: str, timeout: float = 600.0) -> str:
    """Start a python3 kernel in `user`'s server (with the learner's own API token), run `code` in it, return what
    it printed, and shut the kernel down."""
    server = Api(f"{hub_url}/user/{user}", token)
    kernel = server.call("POST", "/api/kernels", {"name": "python3"})
    try:
        ws_url = f"{hub_url.replace('http', 'ws', 1)}/user/{user}/api/kernels/{kernel['id']}/channels"
        return asyncio.run(_execute(ws_url, token, code, timeout))
    finally:
        server.call("DELETE", f"/api/kernels/{kernel['id']}")
