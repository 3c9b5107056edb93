"""Shows task ids, direct emits and ticks: for each input (n) it emits (n) on the
default stream, learns from gale which task that went to, and emits (n) directly to
the same task on stream "direct"; at its first tick tuple it emits (0) on "ticks"."""
import galestorm

ticked = False


def process(tup):
    global ticked
    if tup["stream"] == "__tick":
        assert tup["task"] == -1, tup
        if not ticked:
            ticked = True
            galestorm.emit([0], stream="ticks", need_task_ids=False)
        return
    n = tup["tuple"][0]
    tasks = galestorm.emit([n], anchors=[tup["id"]])
    assert len(tasks) == 1, tasks
    galestorm.send({"command": "emit", "anchors": [tup["id"]], "stream": "direct", "task": tasks[0], "tuple": [n]})


galestorm.run_bolt(process)
