"""A small multilang client for gale (Storm's protocol), for the tests and as an example.

Every message is one JSON value followed by a line "end". A bolt reads tuples and may
read, where it expected a tuple, the list of task ids of one of its emits: it keeps
each kind in its own queue.
"""
import json
import os
import sys

_tuples = []    # tuples read while waiting for task ids
_task_ids = []  # task-id lists read while waiting for a tuple


def read_message():
    lines = []
    while True:
        line = sys.stdin.readline()
        if not line:
            raise EOFError("stdin closed")
        line = line.rstrip("\n")
        if line == "end":
            return json.loads("\n".join(lines))
        lines.append(line)


def send(message):
    sys.stdout.write(json.dumps(message) + "\nend\n")
    sys.stdout.flush()


def handshake():
    """Answers gale's setup message with our pid; returns (conf, context)."""
    setup = read_message()
    pid = os.getpid()
    open(os.path.join(setup["pidDir"], str(pid)), "w").close()
    send({"pid": pid})
    return setup["conf"], setup["context"]


def read_tuple():
    if _tuples:
        return _tuples.pop(0)
    while True:
        m = read_message()
        if isinstance(m, list):
            _task_ids.append(m)
        else:
            return m


def read_task_ids():
    if _task_ids:
        return _task_ids.pop(0)
    while True:
        m = read_message()
        if isinstance(m, list):
            return m
        _tuples.append(m)


def emit(values, anchors=(), stream=None, need_task_ids=True):
    m = {"command": "emit", "tuple": values, "anchors": list(anchors)}
    if stream is not None:
        m["stream"] = stream
    if not need_task_ids:
        m["need_task_ids"] = False
    send(m)
    if need_task_ids:
        return read_task_ids()


def ack(tup):
    send({"command": "ack", "id": tup["id"]})


def fail(tup):
    send({"command": "fail", "id": tup["id"]})


def log(msg, level=2):
    send({"command": "log", "msg": msg, "level": level})


def is_heartbeat(tup):
    return tup["task"] == -1 and tup["stream"] == "__heartbeat"


def run_bolt(process):
    """Runs a bolt: process(tup) for each tuple, acking after it returns and failing
    if it raises (as Storm's BasicBolt); heartbeats are answered with sync."""
    conf, context = handshake()
    while True:
        try:
            tup = read_tuple()
        except EOFError:
            return  # gale closed stdin: the stop
        if is_heartbeat(tup):
            send({"command": "sync"})
            continue
        try:
            process(tup)
        except Exception as e:  # the input fails; the bolt goes on
            log("failed %s: %s" % (tup["id"], e), 3)
            fail(tup)
        else:
            ack(tup)


def run_spout(next_tuple, ack=None, fail=None, activate=None, deactivate=None):
    """Runs a spout: for each command calls next_tuple(), ack(id), fail(id),
    activate() or deactivate(), then syncs. Task-id lists after emits are read and
    dropped."""
    handshake()
    while True:
        try:
            m = read_message()
        except EOFError:
            return
        if isinstance(m, list):
            continue
        cmd = m.get("command")
        if cmd == "next":
            next_tuple()
        elif cmd == "ack" and ack:
            ack(m["id"])
        elif cmd == "fail" and fail:
            fail(m["id"])
        elif cmd == "activate" and activate:
            activate()
        elif cmd == "deactivate" and deactivate:
            deactivate()
        send({"command": "sync"})


def spout_emit(values, msg_id=None, stream=None):
    m = {"command": "emit", "tuple": values}
    if msg_id is not None:
        m["id"] = msg_id
    if stream is not None:
        m["stream"] = stream
    send(m)
