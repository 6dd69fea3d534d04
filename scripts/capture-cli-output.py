#!/usr/bin/env python3
"""
Capture golden outputter texts from Salt's own outputters (run from Salt's unpacked source, never copied
into this project) for test/fixtures/cli-output/cases.json, writing test/fixtures/cli-output/<name>.txt.

    PYTHONPATH=<salt source>:/work/shared/real-salt/shim /usr/bin/python3 scripts/capture-cli-output.py

Each case: {"name", "out", "data", "opts"}; opts are the master options the outputter reads (color,
state_output, state_verbose, output_indent, ...). The text is what salt.output.try_printout returns, the
string the CLI prints (plus its newline).
"""
import copy
import json
import os
import sys

import salt.config
import salt.output

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures", "cli-output")
with open(os.path.join(here, "cases.json")) as fh:
    cases = json.load(fh)

only = set(sys.argv[1:])
for case in cases:
    if only and case["name"] not in only:
        continue
    opts = copy.deepcopy(salt.config.DEFAULT_MASTER_OPTS)
    opts.pop("output", None)
    opts["color"] = False
    for k, v in case.get("opts", {}).items():
        if k.startswith("out.table."):
            opts[k] = v
        else:
            opts[k] = v
    kwargs = {}
    if "_retcode" in case:
        kwargs["_retcode"] = case["_retcode"]
    text = salt.output.try_printout(copy.deepcopy(case["data"]), case["out"], opts, **kwargs)
    with open(os.path.join(here, case["name"] + ".txt"), "w") as fh:
        fh.write("" if text is None else text)
    print(case["name"])

# Python's pprint.pformat (the highstate outputter's "failed to record the order" text, txt of non-mappings)
import pprint  # noqa: E402

PFORMAT_VALUES = [
    {"master_master": {"salt_|-ping_|-ping_|-function": {"__id__": "ping", "__run_num__": 1, "changes": {"out": "highstate", "ret": {"db1": True}}, "comment": "Function ran successfully. Function test.ping ran on db1.", "name": "test.ping", "result": True}}},
    ["short", "x" * 100, "words " * 30, {"k": "line one\nline two " * 10}],
    "a long top level string " * 8,
    [1, 2.5, None, True, "it's", {"nested": [[1, 2], {"deep": "v" * 90}]}],
    list(range(40)),
]
if not only:
    with open(os.path.join(here, "pformat.json"), "w") as fh:
        json.dump([{"value": v, "text": pprint.pformat(v)} for v in PFORMAT_VALUES], fh, indent=1)
    print("pformat.json")
