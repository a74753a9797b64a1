"""Samples the CPU time and peak resident memory of the fleet's node processes.

    python3 sample_nodes.py OUT.json PID...

Every half second, for each PID still alive: utime + stime (/proc/PID/stat) and VmHWM
(/proc/PID/status); OUT.json holds the last values seen, so a node's figures are those of
at most half a second before it exited. For tests/fleet/scale.sh.
"""

import json
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def read(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)
    with open(f"/proc/{pid}/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return {"cpu_s": cpu, "peak_rss_kib": hwm}


def main():
    out, pids = sys.argv[1], sys.argv[2:]
    seen = {}
    while True:
        alive = 0
        for pid in pids:
            try:
                seen[pid] = read(pid)
                alive += 1
            except (OSError, StopIteration, ValueError, IndexError):
                pass
        with open(out + ".tmp", "w") as f:
            json.dump(seen, f)
        os.replace(out + ".tmp", out)
        if not alive and seen:
            return
        time.sleep(0.5)


if __name__ == "__main__":
    main()
