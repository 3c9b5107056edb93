"""A spout whose message ids are JSON values of every kind: gale must give them back
as written. It emits (i) with the i-th id, replays an id that fails, and logs each
id acked or failed as it read it."""
import json
import time

import galestorm

IDS = ["s-1", 2, {"k": [1, 2]}, 12345678901234567890, 1.5, "\u00e9\\n\""]
todo = list(range(len(IDS)))


def next_tuple():
    if todo:
        i = todo.pop(0)
        galestorm.spout_emit([i], msg_id=IDS[i])
    else:
        time.sleep(0.005)


def ack(msg_id):
    galestorm.log("ack %s %s" % (IDS.index(msg_id), json.dumps(msg_id)))


def fail(msg_id):
    galestorm.log("fail %s %s" % (IDS.index(msg_id), json.dumps(msg_id)))
    todo.append(IDS.index(msg_id))


galestorm.run_spout(next_tuple, ack, fail)
