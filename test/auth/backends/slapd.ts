/**
 * A real OpenLDAP slapd for the ldap eauth tests: Debian's `slapd` package (installed by .ci/run), run
 * with a throwaway slapd.conf and mdb database in a temp directory, listening on a free loopback port,
 * loaded offline with slapadd, stopped (by its own pid) and removed at the end.
 *
 * Directory (suffix dc=example,dc=org):
 *   cn=admin (rootdn, ROOT_PW), cn=lookup (LOOKUP_PW, a read-only lookup account)
 *   ou=People: uid=alice (alice-pw), uid=bob (bob-pw), uid=carol (carol-pw), uid=a*b (star-pw)
 *   ou=Groups: posixGroup admins {alice}, posixGroup web {alice, bob}, groupOfNames devs {alice, carol}
 *   ou=Computers: computer web1.example.org, WEB2.example.org, db1 (objectClass computer, defined here)
 * With `openssl` on the machine it also listens on ldaps:// and offers StartTLS, with a self-signed
 * certificate for 127.0.0.1 (certFile).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { freePort } from "../../../tools/free-port.js";

export const SUFFIX = "dc=example,dc=org";
export const ROOT_PW = "root-pw";
export const LOOKUP_DN = `cn=lookup,${SUFFIX}`;
export const LOOKUP_PW = "lookup-pw";

const SLAPD_CANDIDATES = ["/usr/sbin/slapd", "/usr/local/libexec/slapd", "/usr/libexec/slapd"];
const SCHEMA_DIR = "/etc/ldap/schema";
const MODULE_DIR = "/usr/lib/ldap";

function slapdPath(): string | undefined {
  return SLAPD_CANDIDATES.find((p) => existsSync(p));
}

/** why the ldap tests cannot run here, or undefined when they can */
export function slapdSkipReason(): string | undefined {
  const slapd = slapdPath();
  if (!slapd) return "slapd is not installed (Debian: apt-get install slapd ldap-utils; .ci/run installs it)";
  if (!existsSync(path.join(SCHEMA_DIR, "nis.schema"))) return `slapd's schema files are not in ${SCHEMA_DIR}`;
  if (!existsSync(path.join(MODULE_DIR, "back_mdb.so"))) return `slapd's back_mdb module is not in ${MODULE_DIR}`;
  return undefined;
}

const person = (uid: string, pw: string, cn = uid) => `dn: uid=${uid},ou=People,${SUFFIX}
objectClass: inetOrgPerson
uid: ${uid}
cn: ${cn}
sn: ${uid}
userPassword: ${pw}
`;
const posixGroup = (cn: string, gid: number, members: string[]) => `dn: cn=${cn},ou=Groups,${SUFFIX}
objectClass: posixGroup
cn: ${cn}
gidNumber: ${gid}
${members.map((m) => `memberUid: ${m}`).join("\n")}
`;
const computer = (cn: string) => `dn: cn=${cn},ou=Computers,${SUFFIX}
objectClass: computer
cn: ${cn}
`;

const LDIF = [
  `dn: ${SUFFIX}
objectClass: dcObject
objectClass: organization
dc: example
o: Example
`,
  `dn: ${LOOKUP_DN}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: lookup
userPassword: ${LOOKUP_PW}
`,
  ...["People", "Groups", "Computers"].map((ou) => `dn: ou=${ou},${SUFFIX}\nobjectClass: organizationalUnit\nou: ${ou}\n`),
  person("alice", "alice-pw", "Alice Admin"),
  person("bob", "bob-pw"),
  person("carol", "carol-pw"),
  person("a*b", "star-pw"),
  posixGroup("admins", 5001, ["alice"]),
  posixGroup("web", 5002, ["alice", "bob"]),
  `dn: cn=devs,ou=Groups,${SUFFIX}
objectClass: groupOfNames
cn: devs
member: uid=alice,ou=People,${SUFFIX}
member: uid=carol,ou=People,${SUFFIX}
`,
  computer("web1.example.org"),
  computer("WEB2.example.org"),
  computer("db1"),
].join("\n");

function conf(dir: string, tls: boolean): string {
  const tlsLines = tls ? `TLSCertificateFile ${dir}/cert.pem\nTLSCertificateKeyFile ${dir}/key.pem\n` : "";
  return `${tlsLines}include ${SCHEMA_DIR}/core.schema
include ${SCHEMA_DIR}/cosine.schema
include ${SCHEMA_DIR}/nis.schema
include ${SCHEMA_DIR}/inetorgperson.schema
objectclass ( 1.3.6.1.4.1.55555.1.1 NAME 'computer' SUP top STRUCTURAL MUST cn )
pidfile ${dir}/slapd.pid
argsfile ${dir}/slapd.args
modulepath ${MODULE_DIR}
moduleload back_mdb
database mdb
maxsize 16777216
suffix "${SUFFIX}"
rootdn "cn=admin,${SUFFIX}"
rootpw ${ROOT_PW}
directory ${dir}/db
access to attrs=userPassword by self read by anonymous auth by * none
access to * by * read
`;
}

export interface Slapd {
  url: string;
  port: number;
  /** ldaps:// on another port, with a self-signed certificate for 127.0.0.1 (when openssl could make one) */
  tlsPort?: number;
  /** that certificate, PEM (its own CA) */
  certFile?: string;
  stop(): Promise<void>;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port }, () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

export async function startSlapd(): Promise<Slapd> {
  const slapd = slapdPath()!;
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-slapd-"));
  mkdirSync(path.join(dir, "db"));
  // a self-signed certificate for 127.0.0.1, for the ldaps:// and StartTLS tests (openssl from its Debian package)
  const cert = spawnSync("openssl", [
    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
    "-keyout", path.join(dir, "key.pem"), "-out", path.join(dir, "cert.pem"),
  ], { encoding: "utf8", timeout: 30_000 });
  const tls = cert.status === 0;
  writeFileSync(path.join(dir, "slapd.conf"), conf(dir, tls));
  writeFileSync(path.join(dir, "data.ldif"), LDIF);
  const add = spawnSync(slapd, ["-T", "add", "-f", path.join(dir, "slapd.conf"), "-l", path.join(dir, "data.ldif")], { encoding: "utf8", timeout: 30_000 });
  if (add.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`slapadd failed (${add.status}): ${add.stderr}`);
  }
  const port = await freePort();
  const url = `ldap://127.0.0.1:${port}`;
  const tlsPort = tls ? await freePort() : undefined;
  const listen = tls ? `${url}/ ldaps://127.0.0.1:${tlsPort}/` : `${url}/`;
  // -d 0: stay in the foreground (our child, stopped by its pid), log nothing
  const child: ChildProcess = spawn(slapd, ["-d", "0", "-f", path.join(dir, "slapd.conf"), "-h", listen], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += String(d)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const deadline = Date.now() + 15_000;
  while (!(await canConnect(port)) || (tlsPort !== undefined && !(await canConnect(tlsPort)))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`slapd did not start on ${url}: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    port,
    tlsPort,
    certFile: tls ? path.join(dir, "cert.pem") : undefined,
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const t = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
