/**
 * brine's import graph, read from the TypeScript sources with the compiler's parser (no build needed):
 * for every file, its runtime imports (static imports and re-exports that are not type-only, and dynamic
 * `import()`), its type-only imports, and the threads it spawns (`new Worker(new URL(...))`, Piscina's
 * `new URL(...)` filename, a child's `new URL(...)`). The rules of docs/ARCHITECTURE.md ("Import rules")
 * are checked on it by test/architecture/import-rules.test.ts; the functions are pure over a map of
 * path -> source text, so a test can plant a violation.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

export interface FileImports {
  /** repository-relative .ts paths, or bare package names ("zeromq", "node:fs") */
  runtime: string[];
  typeOnly: string[];
  /** repository-relative .ts paths of thread or process entries this file starts */
  spawns: string[];
}

export type Graph = Map<string, FileImports>;

function resolve(from: string, spec: string): string {
  if (!spec.startsWith(".")) return spec.startsWith("node:") ? spec : spec.split("/").slice(0, spec.startsWith("@") ? 2 : 1).join("/");
  return path.posix.normalize(path.posix.join(path.posix.dirname(from), spec)).replace(/\.js$/, ".ts");
}

export function parseImports(file: string, text: string): FileImports {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, false, ts.ScriptKind.TS);
  const out: FileImports = { runtime: [], typeOnly: [], spawns: [] };
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n) && ts.isStringLiteral(n.moduleSpecifier)) {
      const c = n.importClause;
      const typeOnly = c !== undefined && (c.isTypeOnly || (!c.name && c.namedBindings !== undefined && ts.isNamedImports(c.namedBindings) && c.namedBindings.elements.length > 0 && c.namedBindings.elements.every((e) => e.isTypeOnly)));
      (typeOnly ? out.typeOnly : out.runtime).push(resolve(file, n.moduleSpecifier.text));
    } else if (ts.isExportDeclaration(n) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) {
      (n.isTypeOnly ? out.typeOnly : out.runtime).push(resolve(file, n.moduleSpecifier.text));
    } else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword && n.arguments[0] && ts.isStringLiteral(n.arguments[0])) {
      out.runtime.push(resolve(file, n.arguments[0].text));
    } else if (ts.isNewExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === "URL" && n.arguments?.length === 2) {
      const [a, b] = n.arguments;
      if (ts.isStringLiteral(a!) && a.text.startsWith(".") && a.text.endsWith(".js") && b!.getText(sf) === "import.meta.url") out.spawns.push(resolve(file, a.text));
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/** Every .ts file under the given repository-relative folders, read from the repository at `root`. */
export function readSources(root: string, folders: string[]): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const name of readdirSync(path.join(root, rel))) {
      const r = `${rel}/${name}`;
      if (statSync(path.join(root, r)).isDirectory()) walk(r);
      else if (r.endsWith(".ts")) files.set(r, readFileSync(path.join(root, r), "utf8"));
    }
  };
  for (const f of folders) walk(f);
  return files;
}

export function buildGraph(sources: Map<string, string>): Graph {
  const g: Graph = new Map();
  for (const [f, text] of sources) g.set(f, parseImports(f, text));
  return g;
}

/** The files a thread loads: runtime imports from its entry, transitively (spawned threads excluded). */
export function runtimeClosure(g: Graph, entry: string): Map<string, string[]> {
  // file -> the import chain that reached it (for error messages)
  const seen = new Map<string, string[]>([[entry, [entry]]]);
  const todo = [entry];
  while (todo.length) {
    const f = todo.pop()!;
    for (const d of g.get(f)?.runtime ?? []) {
      if (seen.has(d)) continue;
      seen.set(d, [...seen.get(f)!, d]);
      if (g.has(d)) todo.push(d);
    }
  }
  return seen;
}
