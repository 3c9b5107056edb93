"""Splits a line into words: emits (word, occurrence) per word, anchored to the line.

The input is (n, line); a word's occurrence is "n:i", the i-th word of line n, so a
counter can drop a word emitted twice (a line replayed after a failure).

GALE_SPLIT_FAIL_EVERY=K (or K as the first argument, for a command that cannot set
the environment: a Flux file's FluxShellBolt) makes it fail the first attempt of every K-th line, after
emitting the first half of its words (what a bolt crashing mid-line does).
"""
import os
import re
import sys

import galestorm

FAIL_EVERY = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GALE_SPLIT_FAIL_EVERY", "0"))
failed = set()
WORD = re.compile(r"[A-Za-z']+")


def process(tup):
    n, line = tup["tuple"]
    words = WORD.findall(line)
    half = len(words) // 2
    for i, word in enumerate(words):
        if FAIL_EVERY and n % FAIL_EVERY == 0 and n not in failed and i == half:
            failed.add(n)
            raise RuntimeError("failing line %d after %d of its words" % (n, i))
        galestorm.emit([word, "%d:%d" % (n, i)], anchors=[tup["id"]])


galestorm.run_bolt(process)
