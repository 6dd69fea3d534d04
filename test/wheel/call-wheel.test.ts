/**
 * callWheel as Salt's wheel client: positional arguments mapped onto parameters (format_call), Salt's texts
 * for unknown keyword arguments, missing arguments and unknown functions, clients' own keywords ignored,
 * a thrown error as {success: false, return: "Exception occurred in wheel ..."}; and every wheel function
 * issue #12's HTTP API offers is there.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { callWheel, WHEEL_FUNCTIONS } from "../../src/lib/wheel/index.js";
import { makeBed, seed } from "./helpers.js";

test("every wheel function issue #12 lists exists, under Salt's name", () => {
  for (const fun of [
    "key.list_all", "key.list", "key.accept", "key.reject", "key.delete", "key.finger", "key.gen_accept",
    "config.values", "minions.connected", "file_roots.list_roots",
  ]) {
    assert.ok(WHEEL_FUNCTIONS.has(fun), fun);
  }
  // Salt's aliases: key.list_ and key.key_str are only known as key.list and key.print
  assert.ok(WHEEL_FUNCTIONS.has("key.print"));
  assert.ok(!WHEEL_FUNCTIONS.has("key.key_str") && !WHEEL_FUNCTIONS.has("key.list_"));
});

test("an unknown or empty function gets Salt's messages", async () => {
  const bed = makeBed();
  try {
    assert.deepEqual(await callWheel(bed.ctx, "key.nope", [], {}), {
      success: false,
      return: "Exception occurred in wheel key.nope: CommandExecutionError: 'key.nope' is not available.",
    });
    assert.deepEqual(await callWheel(bed.ctx, "key.key_str", ["x"], {}), {
      success: false,
      return: "Exception occurred in wheel key.key_str: CommandExecutionError: 'key.key_str' is not available.",
    });
    assert.deepEqual(await callWheel(bed.ctx, "", [], {}), {
      success: false,
      return: "Exception occurred in wheel : SaltInvocationError: Must specify a function to run!\nex: manage.up",
    });
    assert.equal((await callWheel(bed.ctx, "__proto__", [], {})).success, false);
  } finally {
    bed.cleanup();
  }
});

test("positional arguments fill parameters in order; keywords fill the rest; clients' own keywords are ignored", async () => {
  const bed = makeBed();
  try {
    seed(bed, { rejected: ["r1"] });
    const load = { match: "r1", include_rejected: true, client: "wheel", cmd: "wheel", fun: "key.accept", eauth: "pam", username: "u", password: "p", token: "t", full_return: true, print_event: false, __user__: "u", __jid__: "1", __tag__: "t", kwarg: {} };
    const r = await callWheel(bed.ctx, "key.accept", [], load);
    assert.deepEqual(r, { success: true, return: { minions: ["r1"] } });
    const listed = await callWheel(bed.ctx, "key.list_all", [], { match: "ignored" });
    assert.equal(listed.success, true, "match is a client keyword for functions without that parameter");
  } finally {
    bed.cleanup();
  }
});

test("unknown keyword arguments, missing ones, too many positional ones and duplicates fail with Salt's and Python's texts", async () => {
  const bed = makeBed();
  try {
    const call = async (fun: string, arg: unknown[], kw: Record<string, unknown>) => (await callWheel(bed.ctx, fun, arg, kw)).return;
    assert.equal(await call("key.accept", ["x"], { bogus: 1 }), "Exception occurred in wheel key.accept: SaltInvocationError: 'bogus' is an invalid keyword argument for 'salt.loaded.int.wheel.key.accept'");
    assert.equal(
      await call("key.list_all", [], { a: 1, b: 2, c: 3 }),
      "Exception occurred in wheel key.list_all: SaltInvocationError: 'a', 'b' and 'c' are invalid keyword arguments for 'salt.loaded.int.wheel.key.list_all'",
    );
    assert.equal(await call("key.accept", [], {}), "Exception occurred in wheel key.accept: SaltInvocationError: accept takes at least 1 argument (0 given)");
    // missing arguments are reported before unknown ones, as format_call does
    assert.equal(await call("key.gen_accept", [], { x: 1 }), "Exception occurred in wheel key.gen_accept: SaltInvocationError: gen_accept takes at least 1 argument (0 given)");
    assert.equal(await call("key.accept", ["a", true, true, 4], {}), "Exception occurred in wheel key.accept: TypeError: accept() takes from 1 to 3 positional arguments but 4 were given");
    assert.equal(await call("key.list_all", [1], {}), "Exception occurred in wheel key.list_all: TypeError: list_all() takes 0 positional arguments but 1 was given");
    assert.equal(await call("key.accept", ["a"], { match: "b" }), "Exception occurred in wheel key.accept: TypeError: accept() got multiple values for argument 'match'");
    assert.equal(await call("key.list", [], "x" as never), "Exception occurred in wheel key.list: SaltInvocationError: kwarg must be formatted as a dictionary");
    assert.equal(await call("key.list", "x" as never, {}), "Exception occurred in wheel key.list: SaltInvocationError: arg must be formatted as a list/tuple");
  } finally {
    bed.cleanup();
  }
});

test("an error inside a function is the call's failure, not a throw", async () => {
  const bed = makeBed();
  try {
    // master.pub does not exist in this bed
    const r = await callWheel(bed.ctx, "key.master_key_str", [], {});
    assert.equal(r.success, false);
    assert.match(String(r.return), /^Exception occurred in wheel key\.master_key_str: Error: ENOENT/);
  } finally {
    bed.cleanup();
  }
});
