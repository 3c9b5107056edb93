"""A bolt that misbehaves once, then works: for the error tests.

It passes each input (n) on as (n), anchored, then acks. On its first run (the file
GALE_BAD_MARKER does not exist yet: it makes it) it misbehaves as GALE_BAD says, at
its first tuple (or at its handshake):
  garbage      writes a message that is not JSON
  unknown      sends a command gale does not know
  exit         exits at once, status 3
  nohandshake  never answers the handshake
  noheartbeat  stops reading and answering (hangs)
  undeclared   emits on a stream the component did not declare
  hang         answers the handshake, then sleeps without reading (deaf to EOF)
  orphan       starts a "sleep" in a session of its own that keeps its stdout and
               stderr open (its pid in GALE_BAD_MARKER.pid), then exits, status 5
"""
import os
import subprocess
import sys
import time

import galestorm

MODE = os.environ.get("GALE_BAD", "")
MARKER = os.environ["GALE_BAD_MARKER"]
bad = not os.path.exists(MARKER)
if bad:
    open(MARKER, "w").close()

if bad and MODE == "nohandshake":
    galestorm.read_message()
    time.sleep(3600)
if bad and MODE == "hang":
    galestorm.handshake()
    time.sleep(3600)


def process(tup):
    global bad
    if bad:
        bad = False
        if MODE == "garbage":
            sys.stdout.write("this is not json\nend\n")
            sys.stdout.flush()
        elif MODE == "unknown":
            galestorm.send({"command": "dance", "id": tup["id"]})
        elif MODE == "exit":
            os._exit(3)
        elif MODE == "noheartbeat":
            time.sleep(3600)
        elif MODE == "orphan":
            child = subprocess.Popen(["sleep", "3600"], start_new_session=True)
            with open(MARKER + ".pid", "w") as f:
                f.write(str(child.pid))
            os._exit(5)
        elif MODE == "undeclared":
            galestorm.emit([tup["tuple"][0]], anchors=[tup["id"]], stream="nope")
        time.sleep(3600)  # gale kills us; never ack
    galestorm.emit([tup["tuple"][0]], anchors=[tup["id"]])


galestorm.run_bolt(process)
