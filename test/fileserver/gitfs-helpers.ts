/** A local git repository for gitfs and git_pillar tests: a bare repository, and a work tree that pushes to it. */
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, symlinkSync, writeFileSync, chmodSync } from "node:fs";
import path from "node:path";
import { tempRoot } from "./helpers.js";

export class LocalRepo {
  readonly bare: string;
  readonly work: string;
  readonly url: string;

  constructor(prefix = "brine-git-") {
    const root = tempRoot(prefix);
    this.bare = path.join(root, "repo.git");
    this.work = path.join(root, "work");
    this.url = `file://${this.bare}`;
    this.git(root, "init", "--quiet", "--bare", "--initial-branch=master", this.bare);
    this.git(root, "init", "--quiet", "--initial-branch=master", this.work);
    this.git(this.work, "config", "user.email", "t@example.com");
    this.git(this.work, "config", "user.name", "brine test");
    this.git(this.work, "remote", "add", "origin", this.bare);
  }

  git(cwd: string, ...args: string[]): string {
    return execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, GIT_TERMINAL_PROMPT: "0" } });
  }

  /** Write files ({path: text}; null removes; `{link: target}` a symlink; `{exec: text}` an executable) and commit on `branch`. */
  commit(branch: string, files: Record<string, string | null | { link: string } | { exec: string }>, message = "change"): string {
    const exists = this.git(this.work, "branch", "--list", branch).trim() !== "";
    let hasHead = true;
    try {
      this.git(this.work, "rev-parse", "--verify", "--quiet", "HEAD");
    } catch {
      hasHead = false;
    }
    if (hasHead) this.git(this.work, "checkout", "--quiet", ...(exists ? [branch] : ["-b", branch, "master"]));
    for (const [rel, content] of Object.entries(files)) {
      const p = path.join(this.work, rel);
      rmSync(p, { force: true, recursive: true });
      if (content === null) continue;
      mkdirSync(path.dirname(p), { recursive: true });
      if (typeof content === "string") writeFileSync(p, content);
      else if ("link" in content) symlinkSync(content.link, p);
      else {
        writeFileSync(p, content.exec);
        chmodSync(p, 0o755);
      }
    }
    this.git(this.work, "add", "-A");
    this.git(this.work, "commit", "--quiet", "--allow-empty", "-m", message);
    this.git(this.work, "push", "--quiet", "--force", "origin", branch);
    return this.git(this.work, "rev-parse", "HEAD").trim();
  }

  tag(name: string, annotated = false): void {
    this.git(this.work, "tag", ...(annotated ? ["-a", "-m", name] : []), name);
    this.git(this.work, "push", "--quiet", "origin", name);
  }
}
