"""A bolt that passes (n) on, anchored, and acks; at its first tuple it waits until
the file GALE_GATE exists (a program slower than its input)."""
import os
import time

import galestorm

GATE = os.environ["GALE_GATE"]


def process(tup):
    while not os.path.exists(GATE):
        time.sleep(0.01)
    galestorm.emit([tup["tuple"][0]], anchors=[tup["id"]], need_task_ids=False)


galestorm.run_bolt(process)
