#!/usr/bin/env python3
"""Splits one writer's commit path into segments from a `perf trace` of a 3-voter quorum.

    profile_path.py TRACE TIDMAP

TRACE: `perf trace -e sendmsg,readv,fdatasync,pwrite64` output of the three kq-controller
processes and kq-bench (one writer, 100-byte records). TIDMAP: "tid pid" lines for the
controllers' threads; a thread not listed is the client's. nng sends on the caller's thread
and its poller thread reads each message's 8-byte header, so a message's send and the first
read of it on the other side are both in the trace. Per answered write (the leader's 24-byte
Write answer), the segments are:

  client->leader      the client's send until the leader's poller reads the request
  leader: to records  ... until the leader's loop sends the records to a follower
  leader->follower    ... until the follower's poller reads them
  follower: to sync   ... until the follower's fdatasync starts (nng, loop, decode, LMDB put)
  follower: fdatasync the data pages' fdatasync
  follower: meta page LMDB's O_DSYNC write of its meta page (the second sync)
  follower: to ack    ... until the follower's next Fetch is sent
  follower->leader    ... until the leader's poller reads it
  leader: to answer   ... until the leader sends the Write answer
  leader->client      ... until the client's poller reads it

The follower is the one whose acknowledgement came first. Prints the median and the 10th and
90th percentiles of each segment and of the whole.
"""
import bisect
import collections
import re
import sys

DONE = re.compile(r'^\s*([\d.]+) \(\s*([\d.]+) ms\): (\S+)/(\d+) (\w+)\((.*?)\)\s+= (-?\d+)')
START = re.compile(r'^\s*([\d.]+) \(\s*\): (\S+)/(\d+) (\w+)\((.*?)\s+\.\.\.')
CONT = re.compile(r'^\s*[\d.]+ \(\s*([\d.]+) ms\): \S+/(\d+)\s+\.\.\. \[continued\]: \w+\(\)\)?\s+= (-?\d+)')


def load(trace, tidmap):
    tid2pid = {}
    with open(tidmap) as f:
        for line in f:
            tid, pid = line.split()
            tid2pid[int(tid)] = int(pid)
    events, started = [], {}

    def fd_of(args):
        m = re.search(r'fd: (\d+)', args)
        return int(m.group(1)) if m else -1

    with open(trace) as f:
        for line in f:
            m = DONE.match(line)
            if m:
                t, d, comm, tid, call, args, ret = m.groups()
                events.append((float(t), float(d), tid2pid.get(int(tid), 0), comm, call,
                               fd_of(args), int(ret)))
                continue
            m = START.match(line)
            if m:
                t, comm, tid, call, args = m.groups()
                started[int(tid)] = (float(t), comm, call, fd_of(args))
                continue
            m = CONT.match(line)
            if m and int(m.group(2)) in started:
                t, comm, call, fd = started.pop(int(m.group(2)))
                events.append((t, float(m.group(1)), tid2pid.get(int(m.group(2)), 0), comm,
                               call, fd, int(m.group(3))))
    events.sort()
    return events


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: profile_path.py TRACE TIDMAP')
    ev = load(sys.argv[1], sys.argv[2])
    times = [e[0] for e in ev]
    answers = collections.Counter(e[2] for e in ev if e[4] == 'sendmsg' and e[6] == 24 and e[2])
    if not answers:
        sys.exit('profile_path.py: no Write answers in the trace')
    leader = answers.most_common(1)[0][0]
    followers = sorted({p for p in (e[2] for e in ev) if p and p != leader})

    def first(after, pred, before=float('inf')):
        for e in ev[bisect.bisect_left(times, after):]:
            if e[0] > before:
                return None
            if pred(e):
                return e
        return None

    def last(before, pred):
        i = bisect.bisect_left(times, before) - 1
        while i >= 0 and times[i] > before - 20:
            if pred(ev[i]):
                return ev[i]
            i -= 1
        return None

    def polled(pid):
        return lambda x: x[2] == pid and x[4] == 'readv' and 'poll' in x[3]

    rows = []
    for e in ev:
        if not (e[2] == leader and e[4] == 'sendmsg' and e[6] == 24):
            continue
        t_answer = e[0]
        req = last(t_answer, lambda x: x[2] == 0 and x[4] == 'sendmsg' and x[6] > 100)
        if not req:
            continue
        rcv = first(req[0], polled(leader), t_answer)
        sent = first(req[0], lambda x: x[2] == leader and x[4] == 'sendmsg' and x[6] > 140,
                     t_answer)
        if not rcv or not sent:
            continue
        best = None
        for f in followers:
            got = first(sent[0], polled(f), t_answer)
            sync = first(sent[0], lambda x: x[2] == f and x[4] == 'fdatasync', t_answer)
            ack = first(sent[0], lambda x: x[2] == f and x[4] == 'sendmsg' and x[6] == 61,
                        t_answer)
            if got and sync and ack and ack[0] > sync[0]:
                meta = first(sync[0], lambda x: x[2] == f and x[4] == 'pwrite64' and x[6] == 120,
                             ack[0])
                if meta and (best is None or ack[0] < best[3][0]):
                    best = (f, got, sync, ack, meta)
        if not best:
            continue
        f, got, sync, ack, meta = best
        back = first(ack[0], polled(leader), t_answer)
        home = first(t_answer, polled(0))
        if not back or not home:
            continue
        synced = sync[0] + sync[1]
        rows.append({
            'client->leader': rcv[0] - req[0],
            'leader: to records': sent[0] - rcv[0],
            'leader->follower': got[0] - sent[0],
            'follower: to sync': sync[0] - got[0],
            'follower: fdatasync': sync[1],
            'follower: meta page': meta[0] + meta[1] - synced,
            'follower: to ack': ack[0] - (meta[0] + meta[1]),
            'follower->leader': back[0] - ack[0],
            'leader: to answer': t_answer - back[0],
            'leader->client': home[0] - t_answer,
            'whole': home[0] - req[0],
        })
    if not rows:
        sys.exit('profile_path.py: no complete write in the trace')
    print('%d writes traced; ms per segment: p50 (p10-p90)' % len(rows))
    for k in rows[0]:
        v = sorted(r[k] for r in rows)
        n = len(v)
        print('%-20s %.3f (%.3f-%.3f)' % (k, v[n // 2], v[n // 10], v[9 * n // 10]))


if __name__ == '__main__':
    main()
