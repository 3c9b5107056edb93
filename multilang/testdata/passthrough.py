"""A pass-through bolt, for BenchmarkPythonPassThroughBolt: emits each input's values
anchored to it, then acks it (galestorm.run_bolt acks after process returns).

It asks for no task ids (need_task_ids false), so per input it reads one message and
writes two, as jsonloop.py does with no gale around it.
"""
import galestorm


def process(tup):
    galestorm.emit(tup["tuple"], anchors=[tup["id"]], need_task_ids=False)


galestorm.run_bolt(process)
