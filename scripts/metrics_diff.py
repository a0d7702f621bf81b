#!/usr/bin/env python3
"""What a run added to solo serve's timing histograms: two /metrics scrapes, before and after,
as `mean of the new observations` per histogram (scripts/gpu_run.sh ttft).

    python3 scripts/metrics_diff.py BEFORE AFTER
"""
import re
import sys

HISTOGRAMS = ["solo_time_to_first_token_seconds", "solo_queue_wait_seconds", "solo_prefill_seconds",
              "solo_engine_step_seconds", "solo_snapshot_seconds"]


def read(path):
    values = {}
    for line in open(path):
        m = re.match(r"^(solo_\w+_(?:sum|count)) (\S+)$", line)
        if m:
            values[m.group(1)] = float(m.group(2))
    return values


def main():
    before, after = read(sys.argv[1]), read(sys.argv[2])
    for name in HISTOGRAMS:
        total = after.get(name + "_sum", 0.0) - before.get(name + "_sum", 0.0)
        count = after.get(name + "_count", 0.0) - before.get(name + "_count", 0.0)
        print(f"{name}: {count:.0f} more, mean {1e3 * total / max(count, 1):.2f} ms, total {1e3 * total:.1f} ms")


if __name__ == "__main__":
    main()
