"""A bolt whose first program (the file GALE_MARKER does not exist yet: it makes it)
holds every input without acking or failing it; a program started after it acks
every input it is sent. Heartbeats are answered."""
import os

import galestorm

MARKER = os.environ["GALE_MARKER"]
first = not os.path.exists(MARKER)
if first:
    open(MARKER, "w").close()
galestorm.handshake()
while True:
    try:
        tup = galestorm.read_tuple()
    except EOFError:
        break  # gale closed stdin: the stop
    if galestorm.is_heartbeat(tup):
        galestorm.send({"command": "sync"})
    elif not first:
        galestorm.ack(tup)
