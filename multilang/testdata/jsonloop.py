"""The limit for a Python shell bolt, for BenchmarkPythonJSONLoopAlone: no gale, no
handshake; for each tuple message read from stdin (JSON lines up to a line "end") it
writes the emit and the ack a pass-through bolt would (each a JSON line and "end",
flushed), with galestorm.py's reading and writing. It exits when stdin closes.
"""
import json
import sys


def read_message():
    lines = []
    while True:
        line = sys.stdin.readline()
        if not line:
            return None
        line = line.rstrip("\n")
        if line == "end":
            return json.loads("\n".join(lines))
        lines.append(line)


def send(message):
    sys.stdout.write(json.dumps(message) + "\nend\n")
    sys.stdout.flush()


while True:
    tup = read_message()
    if tup is None:
        break
    send({"command": "emit", "tuple": tup["tuple"], "anchors": [tup["id"]], "need_task_ids": False})
    send({"command": "ack", "id": tup["id"]})
