"""A spout of the numbers 0..GALE_N-1 (message id = the number) whose first program
(the file GALE_MARKER does not exist yet: it makes it) misbehaves as GALE_BAD says:
  activate    exits, status 4, at its activate
  deactivate  exits, status 4, at its deactivate
  deaf        never answers its deactivate (sleeps)
It logs "state active" when activated, "state inactive" when deactivated, "next
while not active" for a next that comes before its activate or after a deactivate,
and "acked I" for each ack."""
import os
import time

import galestorm

N = int(os.environ["GALE_N"])
MODE = os.environ["GALE_BAD"]
MARKER = os.environ["GALE_MARKER"]
bad = not os.path.exists(MARKER)
if bad:
    open(MARKER, "w").close()
todo = list(range(N))
active = False


def activate():
    global active
    if bad and MODE == "activate":
        os._exit(4)
    active = True
    galestorm.log("state active")


def deactivate():
    global active
    if bad and MODE == "deactivate":
        os._exit(4)
    if bad and MODE == "deaf":
        time.sleep(3600)
    active = False
    galestorm.log("state inactive")


def next_tuple():
    if not active:
        galestorm.log("next while not active")
    if todo:
        i = todo.pop(0)
        galestorm.spout_emit([i], msg_id=i)
    else:
        time.sleep(0.005)


galestorm.run_spout(next_tuple, ack=lambda i: galestorm.log("acked %s" % i),
                    activate=activate, deactivate=deactivate)
