#!/usr/bin/env python3
"""The outputter golden cases (test/fixtures/cli-output/cases.json): fixed data and settings, written as JSON;
scripts/capture-cli-output.py then runs Salt's outputters on them."""
import json
hs = {
  "web1": {
    "file_|-motd_|-/etc/motd_|-managed": {"name": "/etc/motd", "changes": {"diff": "--- \n+++ \n@@ -1 +1 @@\n-old\n+new\n"}, "result": True, "comment": "File /etc/motd updated", "__sls__": "motd", "__run_num__": 0, "start_time": "10:01:02.123456", "duration": 12.345, "__id__": "motd"},
    "pkg_|-vim_|-vim_|-installed": {"name": "vim", "changes": {}, "result": True, "comment": "All specified packages are already installed", "__sls__": "base", "__run_num__": 1, "start_time": "10:01:02.200000", "duration": 450.5, "__id__": "vim"},
    "cmd_|-fail_|-false_|-run": {"name": "false", "changes": {"pid": 4242, "retcode": 1, "stdout": "", "stderr": ""}, "result": False, "comment": "Command \"false\" run", "__sls__": "base", "__run_num__": 2, "start_time": "10:01:02.700000", "duration": 7.25, "__id__": "fail"},
    "service_|-nginx_|-nginx_|-running": {"name": "nginx", "changes": {}, "result": None, "comment": "Service nginx is set to start\nafter the config changes", "__sls__": "web", "__run_num__": 3, "start_time": "10:01:03.000000", "duration": 800.125, "__id__": "nginx", "warnings": ["'enable' is deprecated and will be removed in a future release, please use the new option instead of it"]},
  }
}
hs_ok = {"db1": {
    "test_|-a_|-a_|-succeed_without_changes": {"name": "a", "changes": {}, "result": True, "comment": "Success!", "__sls__": "t", "__run_num__": 0, "start_time": "09:00:00.000001", "duration": 0.5, "__id__": "a"},
    "test_|-b_|-b_|-succeed_with_changes": {"name": "b", "changes": {"testing": {"old": "Unchanged", "new": "Something pretended to change"}}, "result": True, "comment": "Success!", "__sls__": "t", "__run_num__": 1, "start_time": "09:00:00.100000", "duration": 0.75, "__id__": "b"},
}}
orch = {"outputter": "highstate", "data": {"master_master": {
    "salt_|-run_web_|-run_web_|-state": {"name": "state.sls", "changes": {"db1": hs_ok["db1"]}, "result": True, "comment": "States ran successfully. Updating db1.", "__sls__": "orch", "__run_num__": 0, "start_time": "11:00:00.000000", "duration": 1234.5, "__id__": "run_web"},
    "salt_|-ping_|-ping_|-function": {"name": "test.ping", "changes": {"ret": {"db1": True}, "out": "highstate"}, "result": True, "comment": "Function ran successfully. Function test.ping ran on db1.", "__sls__": "orch", "__run_num__": 1, "start_time": "11:00:01.300000", "duration": 300.25, "__id__": "ping"},
}}, "retcode": 0}
nest = {"m1": {"foo": {"bar": "baz", "dictionary": {"abc": 123, "def": 456}, "list": ["Hello", "World"], "none": None, "t": True, "f": False, "float": 1.5, "small": 1e-05, "nested_list": [[1, 2], {"k": "v"}, [], {}], "multi": "line one\nline two\n\nline four", "empty": "", "esc": "a\u001b[31mred"}}}
cases = []
def add(name, out, data, opts=None, **kw):
    c = {"name": name, "out": out, "data": data, "opts": opts or {}}
    c.update(kw); cases.append(c)
add("nested-mixed", "nested", nest)
add("nested-color", "nested", nest, {"color": True})
add("nested-color-failed", "nested", {"m1": ["a", {"b": 1}]}, {"color": True}, _retcode=1)
add("nested-scalar-true", "nested", {"m1": True})
add("nested-cmd-run", "nested", {"m1": "total 0\ndrwxr-xr-x 2 root root 40 Nov 25 10:00 ."})
add("json-default", "json", nest)
add("json-indent-2", "json", nest, {"output_indent": 2})
add("json-indent-neg", "json", nest, {"output_indent": -1})
add("json-indent-0", "json", nest, {"output_indent": 0})
add("json-pretty", "json", {"m1": {"z": 1, "a": [1, {"y": 2, "b": None}]}}, {"output_indent": "pretty"})
add("json-unicode", "json", {"m1": {"text": "h\u00e9llo \u2603 \"q\" \\ tab\t", "k\u00e9y": [True, False, None]}})
add("yaml-default", "yaml", {"m1": {"foo": {"bar": "baz", "dictionary": {"abc": 123, "def": 456}, "list": ["Hello", "World"], "none": None, "t": True, "f": False, "float": 1.5, "nested_list": [[1, 2], {"k": "v"}, [], {}], "empty": "", "num_text": "123", "yes_text": "yes", "colon": "a: b"}}})
add("yaml-multiline", "yaml", {"m1": {"out": "line one\nline two", "lead": " space", "star": "*x", "date": "2024-01-01", "tilde": "~", "nul": None, "num": -3, "neg": "-3"}})
add("yaml-folding", "yaml", {"m1": {"plain_long": "word " * 30 + "end", "quoted_long": "it's " * 25 + "end", "multi_long": ("x" * 50 + " ") * 3 + "\nsecond line of it", "tab": "a\tb", "tab_long": "col\t" * 30, "yn": ["y", "n", "Y", "N", "yes", "off"], "uni": "h\u00e9llo \u2603", "dash": "- item", "colon": "key: value", "hash": "a #comment", "lead": "#x", "num_like": ["1.5", "0x1F", "1e3", "1_000", "12:30"], "date": "2024-01-02", "float_exp": 1e-07, "big_float": 1.5e+20, "neg": -2.5, "list_of_maps": [{"b": 1, "a": [1, 2]}, {"c": {"d": None}}], "nested_lists": [[["deep"]]], "empty_str_key": {"": "v"}, "ws": "  padded  ", "nl_end": "ends with newline\n"}})
add("yaml-indent-4", "yaml", {"m1": {"a": [1, {"b": 2, "c": [3]}], "d": {"e": "f"}}}, {"output_indent": 4})
add("yaml-scalar", "yaml", {"m1": True})
add("raw-mixed", "raw", nest)
add("raw-quotes", "raw", {"m1": ["it's", "say \"hi\"", "both ' and \"", "back\\slash", "\u00e9"]})
add("txt-dict", "txt", {"m1": "line one\nline two", "m2": {"a": 1}, "m3": [1, "two"], "m4": None, "m5": ""})
add("txt-list", "txt", [1, 2, "three"])
add("newline-values-only", "newline_values_only", {"myminion": ["127.0.0.1", "10.0.0.1"], "second-minion": ["127.0.0.1", "10.0.0.2"], "third": 8, "fourth": {"a": 1}})
add("table-rows", "table", {"m1": [{"name": "eth0", "ip_addr": "10.0.0.1", "up": True}, {"name": "lo", "ip_addr": "127.0.0.1", "up": True}]})
add("table-list-rows", "table", {"m1": [["a", "bb", "ccc"], ["dddd", "e", "f"]]})
add("table-strings", "table", {"m1": ["one", "two words here", "three"]})
add("key-lists", "key", {"minions": ["web1", "db1"], "minions_pre": ["new1"], "minions_rejected": [], "minions_denied": ["bad"]})
add("key-lists-color", "key", {"minions": ["web1", "db1"], "minions_pre": ["new1"]}, {"color": True})
add("key-dict", "key", {"minions": {"web1": "ab:cd", "db1": "ef:01"}})
add("highstate-full", "highstate", hs)
add("highstate-color", "highstate", hs, {"color": True})
add("highstate-terse", "highstate", hs, {"state_output": "terse"})
add("highstate-mixed", "highstate", hs, {"state_output": "mixed"})
add("highstate-changes", "highstate", hs, {"state_output": "changes"})
add("highstate-filter", "highstate", hs, {"state_output": "filter", "state_output_exclude": ["True"], "state_output_terse": ["None"]})
add("highstate-full-id", "highstate", hs, {"state_output": "full_id"})
add("highstate-terse-id", "highstate", hs, {"state_output": "terse_id"})
add("highstate-not-verbose", "highstate", hs, {"state_verbose": False})
add("highstate-no-profile", "highstate", hs, {"state_output_profile": False})
add("highstate-pct", "highstate", hs, {"state_output_pct": True})
add("highstate-tabular", "highstate", hs, {"state_output": "terse", "state_tabular": True})
add("highstate-diff", "highstate", hs, {"state_output_diff": True})
mm = {"web1": {}}
for i, (nm, res) in enumerate([("true", True), ("false", False), ("/bin/true", True), ("/bin/false", False)]):
    mm["web1"]["cmd_|-mix_|-%s_|-run" % nm] = {"name": nm, "changes": {"retcode": 0 if res else 1}, "result": res, "comment": "Command run", "__sls__": "mix", "__run_num__": i, "start_time": "10:00:0%d.000000" % i, "duration": 8.5 + i, "__id__": "mix"}
add("highstate-compress-ids", "highstate", mm, {"state_compress_ids": True})
add("highstate-compress-ids-terse", "highstate", mm, {"state_compress_ids": True, "state_output": "terse_id"})
add("highstate-all-ok", "highstate", hs_ok)
add("highstate-compile-error", "highstate", {"web1": ["Rendering SLS 'base:broken' failed: mapping values are not allowed here", "second error"]})
add("highstate-string", "highstate", {"web1": "No Top file or master_tops data matches found."})
add("highstate-orchestrate", "highstate", orch)
add("highstate-not-a-state", "highstate", {"web1": {"a": 1}})
add("highstate-int", "highstate", {"web1": 5})
import os
json.dump(cases, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "fixtures", "cli-output", "cases.json"), "w"), indent=1, ensure_ascii=False)
print(len(cases))
