#!/usr/bin/env python3
"""Checks a lab run: every issued sample completed exactly once.

usage: check-exactly-once.py [--require-valid] OUTPUT_DIR

Compares OUTPUT_DIR/issued.txt (`loadgen-node run --record-issued`: every
issued QSL index, in issue order, one per line) with
OUTPUT_DIR/mlperf_log_accuracy.json (one entry per completed sample when
the accuracy-log sampling target is above the sample count, as the lab's
user.conf sets it, or in AccuracyOnly mode): the two multisets of QSL
indices must be equal and no seq_id may appear twice -- the check of
tests/tests/network.rs. Also reports the summary's result line and whether
errors were logged; --require-valid fails unless it says VALID.

Exit status 0 when every check passes, 1 when one fails, 2 on unreadable
input.
"""

import collections
import json
import os
import sys


def fail(message, status=1):
    print(f"check-exactly-once: FAIL: {message}", file=sys.stderr)
    sys.exit(status)


def read_issued(path):
    issued = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                issued.append(int(line))
            except ValueError:
                fail(f"{path} line {number}: {line!r} is not an index", 2)
    return issued


def read_accuracy(path):
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}", 2)
    if not isinstance(entries, list):
        fail(f"{path}: not a JSON array", 2)
    for i, entry in enumerate(entries):
        if not all(isinstance(entry.get(k), int) for k in ("seq_id", "qsl_idx")):
            fail(f"{path}: entry {i} lacks an integer seq_id or qsl_idx: {entry}", 2)
    return entries


def main(argv):
    require_valid = "--require-valid" in argv
    args = [a for a in argv if a != "--require-valid"]
    if len(args) != 1 or args[0].startswith("-"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = args[0]
    issued_path = os.path.join(out, "issued.txt")
    accuracy_path = os.path.join(out, "mlperf_log_accuracy.json")
    summary_path = os.path.join(out, "mlperf_log_summary.txt")
    for path in (issued_path, accuracy_path):
        if not os.path.isfile(path):
            fail(f"{path} not found", 2)

    issued = read_issued(issued_path)
    entries = read_accuracy(accuracy_path)
    if not issued:
        fail(f"{issued_path} is empty: nothing was issued")

    seq_ids = collections.Counter(e["seq_id"] for e in entries)
    twice = [s for s, n in seq_ids.items() if n > 1]
    if twice:
        fail(f"{len(twice)} seq_ids completed more than once, e.g. {sorted(twice)[:5]}")

    want = collections.Counter(issued)
    got = collections.Counter(e["qsl_idx"] for e in entries)
    if want != got:
        missing = want - got
        extra = got - want
        fail(
            f"{len(issued)} samples issued, {len(entries)} completed: "
            f"{sum(missing.values())} issued but not completed "
            f"(e.g. qsl_idx {sorted(missing)[:5]}), "
            f"{sum(extra.values())} completed but not issued or completed again "
            f"(e.g. qsl_idx {sorted(extra)[:5]})"
        )

    result, errors = "no summary", None
    if os.path.isfile(summary_path):
        with open(summary_path, encoding="utf-8") as f:
            summary = f.read()
        result = next(
            (l.strip() for l in summary.splitlines() if l.startswith("Result is")),
            "no 'Result is' line",
        )
        errors = "No errors encountered during test." not in summary
    if errors:
        fail(f"the summary reports errors ({summary_path})")
    if require_valid and not result.endswith(": VALID"):
        fail(f"{summary_path}: {result}")
    print(
        f"check-exactly-once: OK: {len(issued)} samples issued, each completed exactly once "
        f"({len(set(issued))} distinct QSL indices); {result}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
