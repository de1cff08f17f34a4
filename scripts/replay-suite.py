#!/usr/bin/env python3
"""Replay a meson test run's recorded durations through meson's scheduler,
to choose the suite's order (tests/meson.build priorities) before a run.

  scripts/replay-suite.py BUILD-DIR [--log TESTLOG.json] [--slots N]
                          [--priority NAME=P ...] [--jitter F] [--timeline]

The tests, their priorities and their groups (NATSYNC_TEST_GROUP) are
those of BUILD-DIR's meson introspection, the durations those of its
meson-logs/testlog.json (or --log, e.g. another build's log with the same
tests). As meson runs them: N at a time (default 4, as scripts/test.sh
and scripts/sanitize.sh), started in the order of their priorities
(highest first, ties in the order of definition); a test of a group
holds its slot while it waits for its group's lock. A recorded duration
of a group's test includes its wait for the lock: that wait (from its
start to the end of the group's previous holder) is taken out. Tests
missing from the log are left out (the sanitizer runs' filters).

Prints the replayed end of the run, the recorded one, the sum of the
durations over N (no order ends sooner), and with --jitter F the mean end
over 1 000 replays with every duration drawn F either way (0.2: 20 %).
"""
import argparse
import json
import os
import random
import subprocess
import sys


def name_of(t):
    return t['name'].split(' / ')[-1]


def introspect(build):
    out = subprocess.run(['meson', 'introspect', '--tests', build],
                         check=True, capture_output=True, text=True).stdout
    tests = json.loads(out)
    prio = {t['name']: t['priority'] for t in tests}
    groups = {t['name']: t['env'].get('NATSYNC_TEST_GROUP', '')
              for t in tests}
    return [t['name'] for t in tests], prio, groups


def recorded(path, groups):
    """Durations without the wait for a group's lock, and the run's span."""
    runs = []
    with open(path) as f:
        for line in f:
            t = json.loads(line)
            runs.append((name_of(t), t['starttime'],
                         t['starttime'] + t['duration']))
    dur = {}
    for n, s, e in runs:
        g = groups.get(n, '')
        held = [e2 for n2, _, e2 in runs
                if g and n2 != n and groups.get(n2, '') == g and s < e2 <= e]
        dur[n] = e - max([s] + held)
    span = max(e for _, _, e in runs) - min(s for _, s, _ in runs)
    return dur, span


def replay(order, dur, groups, slots, timeline=False):
    free = [0.0] * slots
    lock = {}
    end = 0.0
    for n in order:
        i = min(range(slots), key=lambda k: free[k])
        g = groups.get(n, '')
        start = max(free[i], lock.get(g, 0.0)) if g else free[i]
        if timeline:
            print(f'  {n:16} slot {free[i]:6.1f}  runs {start:6.1f}'
                  f'  ends {start + dur[n]:6.1f}')
        free[i] = start + dur[n]
        if g:
            lock[g] = free[i]
        end = max(end, free[i])
    return end


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('build')
    ap.add_argument('--log')
    ap.add_argument('--slots', type=int, default=4)
    ap.add_argument('--priority', action='append', default=[],
                    metavar='NAME=P')
    ap.add_argument('--jitter', type=float, default=0.0)
    ap.add_argument('--timeline', action='store_true')
    a = ap.parse_args()
    names, prio, groups = introspect(a.build)
    for p in a.priority:
        n, _, v = p.partition('=')
        if n not in prio:
            sys.exit(f'no test {n}')
        prio[n] = int(v)
    log = a.log or os.path.join(a.build, 'meson-logs', 'testlog.json')
    dur, span = recorded(log, groups)
    order = sorted([n for n in names if n in dur], key=lambda n: -prio[n])
    end = replay(order, dur, groups, a.slots, a.timeline)
    print(f'replayed {end:.1f} s, recorded {span:.1f} s, '
          f'sum/{a.slots} {sum(dur[n] for n in order) / a.slots:.1f} s')
    if a.jitter > 0:
        rnd = random.Random(1)
        ends = [replay(order, {n: d * rnd.uniform(1 - a.jitter, 1 + a.jitter)
                               for n, d in dur.items()}, groups, a.slots)
                for _ in range(1000)]
        print(f'jitter {a.jitter:g}: mean {sum(ends) / len(ends):.1f} s')


if __name__ == '__main__':
    main()
