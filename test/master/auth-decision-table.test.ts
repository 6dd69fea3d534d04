/** Every row of the `_auth` decision table (salt-protocol §3.2), in Salt's order of precedence. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { decideAuth, type AuthFacts } from "../../src/workers/req-handler/auth-decision.js";

const PUB = "-----BEGIN PUBLIC KEY-----\nAAA\n-----END PUBLIC KEY-----";
const OTHER = "-----BEGIN PUBLIC KEY-----\nBBB\n-----END PUBLIC KEY-----";
const base: AuthFacts = { idValid: true, pub: PUB, openMode: false, full: false, rejectedExists: false, pendingIsDir: false, autoreject: false, autosign: false };
const d = (f: Partial<AuthFacts>) => decideAuth({ ...base, ...f });

test("1. an invalid id is refused with no event", () => {
  assert.deepEqual(d({ idValid: false, accepted: PUB }), { kind: "invalid" });
});
test("2. max_minions reached: full, before anything else is looked at", () => {
  assert.deepEqual(d({ full: true, accepted: PUB, openMode: true }), { kind: "full" });
});
test("3. open_mode accepts and overwrites a changed key; an empty key is refused", () => {
  assert.deepEqual(d({ openMode: true, accepted: OTHER }), { kind: "accept", ops: [{ op: "write", state: "accepted" }] });
  assert.deepEqual(d({ openMode: true, accepted: PUB }), { kind: "accept", ops: [] });
  assert.equal(d({ openMode: true, pub: "" }).kind, "refuse");
});
test("4. a rejected key refuses, even when also accepted", () => {
  const o = d({ rejectedExists: true, accepted: PUB });
  assert.equal(o.kind, "refuse");
  assert.ok(o.kind === "refuse" && o.ret === false && o.ops.length === 0);
});
test("5. accepted with a different key: denied, key written to minions_denied", () => {
  assert.deepEqual(d({ accepted: OTHER }), { kind: "refuse", ret: false, ops: [{ op: "write", state: "denied" }], event: { result: false, act: "denied" } });
});
test("6. accepted with the same key: accept, nothing written", () => {
  assert.deepEqual(d({ accepted: PUB }), { kind: "accept", ops: [] });
});
test("7. minions_pre/<id> is a directory: refused", () => {
  const o = d({ pendingIsDir: true });
  assert.ok(o.kind === "refuse" && o.ret === false && o.ops.length === 0);
});
test("8. new key and autoreject: written to rejected", () => {
  assert.deepEqual(d({ autoreject: true }), { kind: "refuse", ret: false, ops: [{ op: "write", state: "rejected" }], event: { result: false, act: "reject" } });
});
test("9. new key, no autosign: pending (ret True, act pend)", () => {
  assert.deepEqual(d({}), { kind: "refuse", ret: true, ops: [{ op: "write", state: "pending" }], event: { result: true, act: "pend" } });
});
test("10. new key and autosign: accepted at once", () => {
  assert.deepEqual(d({ autosign: true }), { kind: "accept", ops: [{ op: "write", state: "accepted" }] });
});
test("11. pending and autoreject: moved to rejected", () => {
  assert.deepEqual(d({ pending: PUB, autoreject: true }), { kind: "refuse", ret: false, ops: [{ op: "move", from: "pending", to: "rejected" }], event: { result: false, act: "reject" } });
});
test("12. pending, no autosign: same key stays pending; a different key is denied", () => {
  assert.deepEqual(d({ pending: PUB }), { kind: "refuse", ret: true, ops: [], event: { result: true, act: "pend" } });
  assert.deepEqual(d({ pending: OTHER }), { kind: "refuse", ret: false, ops: [{ op: "write", state: "denied" }], event: { result: false, act: "denied" } });
});
test("13. pending and autosign: same key moves to accepted; a different key is denied", () => {
  assert.deepEqual(d({ pending: PUB, autosign: true }), { kind: "accept", ops: [{ op: "delete", state: "pending" }, { op: "write", state: "accepted" }] });
  assert.equal(d({ pending: OTHER, autosign: true }).kind, "refuse");
});
