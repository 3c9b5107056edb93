"""Counts words: emits (word, count) anchored to each input word it had not seen.

The input is (word, occurrence); an occurrence seen before (a replay) is acked and
not counted again, so the counts are exact under replays.
"""
import sys

import galestorm

counts = {}
seen = set()


def process(tup):
    word, occurrence = tup["tuple"]
    if occurrence in seen:
        return
    seen.add(occurrence)
    counts[word] = counts.get(word, 0) + 1
    galestorm.emit([word, counts[word]], anchors=[tup["id"]], need_task_ids=False)


print("count.py ready", file=sys.stderr, flush=True)  # goes to gale's log
galestorm.run_bolt(process)
