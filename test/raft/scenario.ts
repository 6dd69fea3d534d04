/**
 * Golden scenario scripts (in the spirit of etcd's datadriven interaction tests). A file under
 * test/raft/testdata is a sequence of blocks:
 *
 *   # optional comment lines
 *   command arg arg
 *   ----
 *   expected output (every Ready, every delivered message, status lines), or "ok"
 *
 * separated by blank lines. `runScenario` replays the commands against a fresh Env and returns the expected
 * and actual text of every block; `REWRITE=1 npm test` rewrites the files with the actual output, for review
 * in the diff.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { describeEntries, describeResult } from "../../src/workers/raft/core/describe.js";
import type { ConfChangeKind, NodeId } from "../../src/workers/raft/core/types.js";
import { Env } from "./env.js";

export interface Block {
  comments: string[];
  command: string;
  expected: string;
}

export function parseScenario(text: string): Block[] {
  const lines = text.split("\n");
  const blocks: Block[] = [];
  let comments: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === "") continue;
    if (line.startsWith("#")) {
      comments.push(line);
      continue;
    }
    if (lines[i + 1] !== "----") throw new Error(`line ${i + 1}: "${line}" must be followed by ----`);
    const out: string[] = [];
    i += 2;
    while (i < lines.length && lines[i]!.trim() !== "") out.push(lines[i++]!);
    blocks.push({ comments, command: line, expected: out.join("\n") });
    comments = [];
  }
  return blocks;
}

export function formatScenario(blocks: readonly Block[]): string {
  return blocks.map((b) => [...b.comments, b.command, "----", b.expected].join("\n")).join("\n\n") + "\n";
}

const ids = (args: string[]): NodeId[] => args.filter((a) => a !== "|").map(Number);

const CONF_KINDS: Record<string, ConfChangeKind> = { "add-voter": "addVoter", "add-learner": "addLearner", remove: "removeNode" };

/** Runs one command; returns its output lines. */
export function runCommand(env: Env, command: string): string[] {
  const [cmd, ...args] = command.split(/\s+/);
  env.out = [];
  const extra: string[] = [];
  const node = () => Number(args[0]);
  switch (cmd) {
    case "add-nodes": {
      const opt = (name: string) => args.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
      const members = args.filter((a) => !a.includes("=")).map(Number);
      const voters = opt("voters")?.split(",").map(Number) ?? members;
      const learners = opt("learners")?.split(",").map(Number) ?? [];
      env.addNodes(members, voters, learners);
      break;
    }
    case "add-joiner":
      env.addJoiner(node());
      break;
    case "campaign":
      env.campaign(node());
      break;
    case "tick":
      env.tick(node(), Number(args[1] ?? 1));
      break;
    case "tick-election":
      env.tick(node(), env.limits.electionTicksMin!);
      break;
    case "tick-heartbeat":
      env.tick(node(), env.limits.heartbeatTicks!);
      break;
    case "tick-all":
      env.tickAll(Number(args[0] ?? 1));
      break;
    case "process-ready":
      for (const id of ids(args)) env.processReady(id);
      break;
    case "deliver-msgs":
      env.deliver(ids(args));
      break;
    case "drop-msgs":
      env.dropQueued(ids(args));
      break;
    case "stabilize":
      env.stabilize(args.length > 0 ? ids(args) : undefined);
      break;
    case "propose":
      extra.push(`request ${env.propose(node(), args[1] ?? "")}`);
      break;
    case "propose-conf": {
      const kind = CONF_KINDS[args[1] ?? ""];
      if (!kind) throw new Error(`propose-conf: unknown change ${args[1]}`);
      extra.push(`request ${env.proposeConf(node(), { kind, node: Number(args[2]) })}`);
      break;
    }
    case "read-index":
      extra.push(`request ${env.readIndex(node())}`);
      break;
    case "transfer-leader":
      env.transfer(node(), Number(args[1]));
      break;
    case "partition": {
      const groups: NodeId[][] = [[]];
      for (const a of args) {
        if (a === "|") groups.push([]);
        else groups[groups.length - 1]!.push(Number(a));
      }
      env.partition(groups);
      break;
    }
    case "heal":
      env.heal();
      break;
    case "quiesce":
      extra.push(`quiesce: ${env.rn(node()).quiesce() ? "resting" : "refused"}`);
      break;
    case "report-unreachable":
      env.rn(node()).reportUnreachable(Number(args[1]));
      break;
    case "crash":
      env.crash(node());
      break;
    case "restart":
      env.restart(node());
      break;
    case "compact":
      env.compact(node());
      break;
    case "status":
      for (const id of args.length > 0 ? ids(args) : env.ids()) extra.push(...env.status(id).split("\n"));
      break;
    case "results":
      for (const id of ids(args)) for (const r of env.takeResults(id)) extra.push(`${id}: ${describeResult(r)}`);
      break;
    case "applied":
      for (const id of ids(args)) extra.push(`${id}: ${describeEntries(env.appliedBy.get(id)!)}`);
      break;
    default:
      throw new Error(`unknown command ${cmd}`);
  }
  return [...env.out, ...extra];
}

export interface ScenarioOutcome {
  blocks: Block[];
  actual: string[];
}

export function runScenario(file: string): ScenarioOutcome {
  const blocks = parseScenario(readFileSync(file, "utf8"));
  const env = new Env();
  const actual = blocks.map((b) => {
    const lines = runCommand(env, b.command);
    return lines.length > 0 ? lines.join("\n") : "ok";
  });
  if (process.env["REWRITE"] === "1") {
    writeFileSync(file, formatScenario(blocks.map((b, k) => ({ ...b, expected: actual[k]! }))));
  }
  return { blocks, actual };
}
