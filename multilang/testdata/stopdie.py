"""A bolt for the stop tests. Its first program (the file GALE_MARKER does not exist
yet: it makes it) misbehaves as GALE_MODE says; a program started after it too,
as the mode says:
  poison  the first holds every input (never acks); every later one exits, status
          7, at the first input it reads
  deaf    the first answers the handshake, then reads nothing (sleeps); every later
          one acks every input
Heartbeats are answered."""
import os
import sys
import time

import galestorm

MODE = os.environ["GALE_MODE"]
MARKER = os.environ["GALE_MARKER"]
first = not os.path.exists(MARKER)
if first:
    open(MARKER, "w").close()
galestorm.handshake()
if first and MODE == "deaf":
    time.sleep(3600)
while True:
    try:
        tup = galestorm.read_tuple()
    except EOFError:
        break  # gale closed stdin: the stop
    if galestorm.is_heartbeat(tup):
        galestorm.send({"command": "sync"})
    elif first:
        pass
    elif MODE == "poison":
        sys.stderr.write("poisoned by %s\n" % tup["id"])
        sys.stderr.flush()
        os._exit(7)
    else:
        galestorm.ack(tup)
