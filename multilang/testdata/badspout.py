"""A spout of the numbers 0..GALE_N-1 (message id = the number, replayed on fail)
that misbehaves once (when the file GALE_BAD_MARKER does not exist yet), at its
third next, as GALE_BAD says:
  nosync   stops answering (hangs)
  exit     exits at once, status 4
  garbage  writes a message that is not JSON
A restarted run starts over from 0. It logs "state active" when activated, "state
inactive" when deactivated, and "next while not active" for a next that comes before
its activate or after a deactivate."""
import os
import sys
import time

import galestorm

N = int(os.environ["GALE_N"])
MODE = os.environ["GALE_BAD"]
MARKER = os.environ["GALE_BAD_MARKER"]
bad = not os.path.exists(MARKER)
if bad:
    open(MARKER, "w").close()
nexts = 0
todo = list(range(N))
active = False


def set_active(on):
    global active
    active = on
    galestorm.log("state active" if on else "state inactive")


def next_tuple():
    global nexts
    if not active:
        galestorm.log("next while not active")
    nexts += 1
    if bad and nexts == 3:
        if MODE == "nosync":
            time.sleep(3600)
        elif MODE == "exit":
            os._exit(4)
        elif MODE == "garbage":
            sys.stdout.write("{\"command\": \nend\n")
            sys.stdout.flush()
            time.sleep(3600)
    if todo:
        i = todo.pop(0)
        galestorm.spout_emit([i], msg_id=i)
    else:
        time.sleep(0.005)


galestorm.run_spout(next_tuple, fail=lambda i: todo.append(i),
                    activate=lambda: set_active(True), deactivate=lambda: set_active(False))
