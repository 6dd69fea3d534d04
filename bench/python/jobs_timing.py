"""
The Python master's side of bench/jobs-vs-python.ts: Salt's own job cache (the local_cache returner) filled with
JOBS jobs of one return each and one job of BIG returns, then Salt's own `jobs` runner functions timed in this
process, the way `salt-run` runs them after its start (the start itself left out, as on brine's side).

CONF is the config file of a running Python master (the harness's start-master.sh writes it): its job cache is
filled, and the runners fire their events to it as `salt-run`'s do. Run with Salt's source on PYTHONPATH
(../shared/real-salt's env.sh: rs_src_for_ref, rs_pyenv):
    python3 jobs_timing.py CONF JOBS BIG CALLS
Prints one JSON object: per figure, the wall and CPU (this process's and its waited-for children's, os.times) of
each timed call, in ms.
"""
import json
import os
import sys
import time

import salt.config
import salt.loader


def main():
    conf, jobs, big, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    opts = salt.config.master_config(conf)
    rets = salt.loader.returners(opts, {})
    base = time.time() - 3600

    def jid_at(i):
        t = base + i * 0.1
        return time.strftime("%Y%m%d%H%M%S", time.localtime(t)) + f"{int((t % 1) * 1e6):06d}"

    t0 = time.monotonic()
    jids = []
    for i in range(jobs):
        jid = jid_at(i)
        jids.append(jid)
        minions = [f"minion-{m:04d}" for m in range(big)] if i == jobs - 1 else ["m1"]
        load = {"fun": "test.ping", "arg": [], "tgt": "*", "tgt_type": "glob", "user": "root", "jid": jid}
        rets["local_cache.prep_jid"](passed_jid=jid)
        rets["local_cache.save_load"](jid, load, minions)
        for m in minions:
            rets["local_cache.returner"](
                {"jid": jid, "id": m, "return": True, "retcode": 0, "success": True, "fun": "test.ping", "fun_args": []}
            )
    fill_s = time.monotonic() - t0

    runners = salt.loader.runner(opts, utils=salt.loader.utils(opts))

    def cpu_s():
        # this process and any children it waited for
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def timed(fun, args, check):
        out = []
        for k in range(calls + 1):
            w, c = time.perf_counter(), cpu_s()
            r = runners[fun](*args)
            out.append({"wall": (time.perf_counter() - w) * 1000, "cpu": (cpu_s() - c) * 1000})
            check(r)
        return {"first": out[0], "calls": out[1:]}

    def has_jobs(r):
        if len(r) < jobs:
            raise SystemExit(f"list_jobs: {len(r)} jobs, not {jobs}")

    def has_big(r):
        if len(r) != big:
            raise SystemExit(f"lookup_jid: {len(r)} returns, not {big}")

    figures = {
        "fill_s": fill_s,
        "noop": timed("jobs.lookup_jid", ["20000101000000000000"], lambda r: None),
        "list_jobs": timed("jobs.list_jobs", [], has_jobs),
        "lookup_jid": timed("jobs.lookup_jid", [jids[-1]], has_big),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
