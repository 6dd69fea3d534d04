/**
 * Loading a master configuration directory: every declared option checked against the schema (a bad value
 * stops the start naming the option and its file), Salt's coercions, one warning per unknown option (with
 * "did you mean") or unimplemented Salt option, and master.d / default_include / include as Salt reads them
 * (salt/config/__init__.py master_config, include_config).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { loadMasterConfig } from "../../src/shared/config/load.js";
import { isBrineError } from "../../src/shared/errors.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";

interface Loaded {
  cfg: MasterConfig;
  warnings: string[];
}

/** a config dir holding `files` (relative paths -> YAML text), loaded; removed afterwards */
function withConfig(files: Record<string, string>, fn: (dir: string, load: () => Loaded) => void): void {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-cfg-"));
  try {
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      writeFileSync(path.join(dir, rel), text);
    }
    fn(dir, () => {
      const warnings: string[] = [];
      const cfg = loadMasterConfig(dir, {}, { warn: (m) => warnings.push(m) });
      return { cfg, warnings };
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function refusedNaming(load: () => unknown, ...parts: string[]): void {
  assert.throws(load, (e) => isBrineError(e, "CONFIG_INVALID") && parts.every((p) => (e as Error).message.includes(p)), `expected CONFIG_INVALID naming ${parts.join(", ")}`);
}

test("brine_queue_len_max: lots stops the start naming the option and its file (it was NaN: an unbounded request lane)", () => {
  withConfig({ master: "brine_queue_len_max: lots\n" }, (dir, load) => refusedNaming(load, "brine_queue_len_max", path.join(dir, "master"), '"lots"'));
});

test("brine_auth_stale_ms that is not a number stops the start naming the option and its file", () => {
  withConfig({ master: "auto_accept: true\n", "master.d/lanes.conf": "brine_auth_stale_ms: soon\n" }, (dir, load) =>
    refusedNaming(load, "brine_auth_stale_ms", path.join(dir, "master.d", "lanes.conf")),
  );
});

test("values out of their declared bounds or of the wrong type are refused", () => {
  for (const bad of ["publish_port: 70000", "publish_port: 4505.5", "worker_threads: 0", "keysize: 1000", "auto_accept: 1", "file_ignore_glob: '*.bak'", "log_level: loud", "nodegroups: [a, b]", "brine_queue_len_max: 0"]) {
    const name = bad.split(":")[0]!;
    withConfig({ master: `${bad}\n` }, (_dir, load) => refusedNaming(load, `${name}:`));
  }
});

test("a bad key inside rest_cherrypy is named with its section", () => {
  withConfig({ master: "rest_cherrypy:\n  port: lots\n  disable_ssl: true\n" }, (_dir, load) => refusedNaming(load, "rest_cherrypy.port"));
});

test("numeric strings and numeric ids are coerced and YAML 1.1 booleans read as Salt reads them; a quoted boolean is refused", () => {
  withConfig({ master: "brine_queue_len_max: '20'\ntimeout: '2.5'\nauto_accept: yes\nopen_mode: Off\nid: 42\nkeysize: '4096'\nrest_cherrypy:\n  port: '8080'\n" }, (_dir, load) => {
    const { cfg, warnings } = load();
    assert.equal(cfg.brine_queue_len_max, 20);
    assert.equal(cfg.timeout, 2.5);
    assert.equal(cfg.auto_accept, true);
    assert.equal(cfg.open_mode, false);
    assert.equal(cfg.id, "42");
    assert.equal(cfg.keysize, 4096);
    assert.equal(cfg.rest_cherrypy?.port, 8080);
    assert.deepEqual(warnings, []);
  });
  withConfig({ master: "auto_accept: 'yes'\n" }, (_dir, load) => refusedNaming(load, "auto_accept:"));
});

test("an option written with no value takes its default (Salt: an uncommented empty nodegroups:)", () => {
  withConfig({ master: "nodegroups:\nbrine_queue_len_max:\nautosign_file:\n" }, (_dir, load) => {
    const { cfg } = load();
    assert.deepEqual(cfg.nodegroups, {});
    assert.equal(cfg.brine_queue_len_max, 10_000);
    assert.equal(cfg.autosign_file, null);
  });
});

test("nodegroups written as a list of one-key mappings are one mapping, as Salt's master_config repacks them", () => {
  withConfig({ master: "nodegroups:\n  - web: 'web*'\n  - db: ['L@db1,db2']\n" }, (_dir, load) => assert.deepEqual(load().cfg.nodegroups, { web: "web*", db: ["L@db1,db2"] }));
});

test("an unknown option gets one warning with the closest known name, even when set in two files", () => {
  withConfig({ master: "auto_acept: true\n", "master.d/a.conf": "auto_acept: false\n" }, (_dir, load) => {
    const { cfg, warnings } = load();
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.match(warnings[0]!, /unknown option auto_acept .*did you mean auto_accept\?/);
    assert.equal(cfg.auto_accept, false);
    assert.equal(cfg.auto_acept, false, "kept, as Salt keeps unknown options");
  });
  withConfig({ master: "zzqx_frobnicate: 1\n" }, (_dir, load) => {
    const { warnings } = load();
    assert.equal(warnings.length, 1);
    assert.doesNotMatch(warnings[0]!, /did you mean/);
  });
});

test("a Salt master option brine does not implement is warned about by name, unless it holds Salt's default", () => {
  withConfig({ master: "hgfs_remotes:\n  - https://example.org/states\nauth_mode: 1\nmaster_job_cache: local_cache\nworker_threads: 2\n" }, (dir, load) => {
    const { warnings } = load();
    assert.deepEqual(warnings, [`brine does not implement hgfs_remotes; it is ignored (set in ${path.join(dir, "master")})`]);
  });
  withConfig({ master: "master_job_cache: redis\n" }, (_dir, load) => {
    assert.match(load().warnings.join("\n"), /brine does not implement master_job_cache; it is ignored/);
  });
  // Salt 3009's mmap_key sizing: brine's indexed store has no slots to size
  withConfig({ master: "keys.cache_driver: mmap_key\nmmap_key_size: 2000000\n" }, (_dir, load) => {
    const { cfg, warnings } = load();
    assert.equal(cfg["keys.cache_driver"], "mmap_key");
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.match(warnings[0]!, /^brine does not implement mmap_key_size \(slots of Salt's mmap_key index\); it is ignored/);
  });
});

test("master.d/*.conf files are read in name order after master, and override it", () => {
  withConfig({ master: "timeout: 7\nloop_interval: 30\n", "master.d/20-b.conf": "timeout: 9\n", "master.d/10-a.conf": "timeout: 8\nkeep_jobs_seconds: 5\n", "master.d/ignored.txt": "timeout: 1\n" }, (_dir, load) => {
    const { cfg } = load();
    assert.equal(cfg.timeout, 9);
    assert.equal(cfg.loop_interval, 30);
    assert.equal(cfg.keep_jobs_seconds, 5);
  });
});

test("default_include replaces master.d/*.conf and matching nothing is silent", () => {
  withConfig({ master: "default_include: conf.d/*.yml\n", "conf.d/a.yml": "timeout: 11\n", "master.d/a.conf": "timeout: 3\n" }, (_dir, load) => {
    const { cfg, warnings } = load();
    assert.equal(cfg.timeout, 11);
    assert.deepEqual(warnings, []);
  });
  withConfig({ master: "default_include: nowhere/*.conf\n" }, (_dir, load) => assert.deepEqual(load().warnings, []));
});

test("include: globs relative to the config directory, absolute paths, read after master.d, and a pattern matching nothing warns", () => {
  const abs = mkdtempSync(path.join(os.tmpdir(), "brine-cfg-abs-"));
  try {
    writeFileSync(path.join(abs, "extra.conf"), "gather_job_timeout: 4\n");
    withConfig(
      { master: `include:\n  - extra/*.conf\n  - ${path.join(abs, "extra.conf")}\n  - missing/*.conf\n`, "extra/a.conf": "timeout: 12\n", "master.d/a.conf": "timeout: 3\n" },
      (dir, load) => {
        const { cfg, warnings } = load();
        assert.equal(cfg.timeout, 12, "include is read after default_include");
        assert.equal(cfg.gather_job_timeout, 4);
        assert.equal(warnings.length, 1);
        assert.match(warnings[0]!, new RegExp(`include: '${path.join(dir, "missing")}/\\*\\.conf' matches no files`));
      },
    );
  } finally {
    rmSync(abs, { recursive: true, force: true });
  }
});

test("included files merge mappings and join lists; their own include is relative to them", () => {
  withConfig(
    {
      master: "file_roots:\n  base: [/srv/main]\ninclude: inc/*.conf\n",
      "inc/a.conf": "file_roots:\n  base: [/srv/a]\n  dev: [/srv/dev]\ninclude: more/b.conf\n",
      "inc/c.conf": "file_roots:\n  base: [/srv/a, /srv/c]\n",
      "inc/more/b.conf": "timeout: 13\n",
    },
    (_dir, load) => {
      const { cfg } = load();
      assert.deepEqual(cfg.file_roots, { base: ["/srv/a", "/srv/c"], dev: ["/srv/dev"] }, "included files replace master's file_roots; among themselves they merge");
      assert.equal(cfg.timeout, 13);
    },
  );
});

test("an include loop is refused instead of recursing forever", () => {
  withConfig({ master: "include: a.conf\n", "a.conf": "include: a.conf\n" }, (_dir, load) => refusedNaming(load, "include", "loop"));
});

test("a bad value in an included file names that file", () => {
  withConfig({ master: "include: extra.conf\n", "extra.conf": "publish_port: many\n" }, (dir, load) => refusedNaming(load, "publish_port", path.join(dir, "extra.conf")));
});

test("root_dir is put in front of pki_dir and cachedir but not of cluster_pki_dir, as Salt 3007's master_config does", () => {
  withConfig({ master: "root_dir: /srv/brine-root\npki_dir: /pki/master\ncachedir: /cache\ncluster_id: c1\ncluster_peers: []\ncluster_pki_dir: /shared/cluster-pki\n" }, (_dir, load) => {
    const { cfg } = load();
    assert.equal(cfg.pki_dir, "/srv/brine-root/pki/master");
    assert.equal(cfg.cachedir, "/srv/brine-root/cache");
    assert.equal(cfg.cluster_pki_dir, "/shared/cluster-pki");
  });
});
