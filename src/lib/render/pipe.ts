/**
 * Salt's render pipe (salt/template.py: compile_template, template_shebang, check_render_pipe_str):
 * the file's first line `#!jinja|yaml` (not `#!/…`) picks the renderers, else the `renderer` option
 * (default `jinja|yaml`); old combined names (`yaml_jinja`…) map to pipes. Each stage gets the previous
 * stage's output. Empty and whitespace-only files render to `{}`.
 *
 * Renderers: `jinja` (text → text), `yaml` (text → data, `{}` when empty), `json` (text → data).
 * Any other renderer (py, mako, gpg, yamlex, …) is a RenderError naming it.
 */
import { RenderError } from "./render-error.js";
import { sourceContext, type JinjaEnv } from "./jinja.js";
import { loadYaml, YamlError } from "./yaml.js";

const OLD_STYLE: Record<string, string> = {
  yaml_jinja: "jinja|yaml",
  yaml_mako: "mako|yaml",
  yaml_wempy: "wempy|yaml",
  json_jinja: "jinja|json",
  json_mako: "mako|json",
  json_wempy: "wempy|json",
  yamlex_jinja: "jinja|yamlex",
};

export const SUPPORTED_RENDERERS = ["jinja", "yaml", "json"] as const;

export interface PipeInput {
  /** the file's text */
  text: string;
  /** its path, for messages */
  file: string;
  /** its root-relative name, for the Jinja loader (the first Jinja stage renders the cached template) */
  name: string;
  defaultPipe: string;
  jinja: JinjaEnv;
  context: Record<string, unknown>;
  blacklist?: string[];
  whitelist?: string[];
}

/** The renderer names a file asks for. */
export function renderPipeOf(text: string, defaultPipe: string): string[] {
  const first = text.split("\n", 1)[0] ?? "";
  let pipe = defaultPipe;
  if (first.startsWith("#!") && !first.startsWith("#!/")) pipe = first.trim().slice(2);
  pipe = pipe.trim();
  if (OLD_STYLE[pipe]) pipe = OLD_STYLE[pipe]!;
  return pipe.split("|").map((p) => p.trim());
}

export function renderPipe(i: PipeInput): unknown {
  if (i.text.trim() === "") return {};
  const stages = renderPipeOf(i.text, i.defaultPipe);
  let data: unknown = i.text;
  let first = true;
  for (const part of stages) {
    const name = part.split(/\s+/, 1)[0] ?? "";
    if ((i.whitelist?.length && !i.whitelist.includes(name)) || (i.blacklist?.length && i.blacklist.includes(name))) continue;
    switch (name) {
      case "jinja": {
        if (typeof data !== "string") throw new RenderError(i.file, undefined, "The jinja renderer needs text, but an earlier renderer produced data");
        data = first && data === i.text ? i.jinja.render(i.name, i.context) : i.jinja.renderString(data, i.file, i.context);
        break;
      }
      case "yaml": {
        if (typeof data !== "string") throw new RenderError(i.file, undefined, "The yaml renderer needs text, but an earlier renderer produced data");
        const text = data;
        try {
          data = loadYaml(text) || {};
        } catch (e) {
          const line = e instanceof YamlError ? e.line : undefined;
          throw new RenderError(i.file, line, `YAML error: ${(e as Error).message}`, sourceContext(text, line));
        }
        break;
      }
      case "json": {
        if (typeof data !== "string") throw new RenderError(i.file, undefined, "The json renderer needs text, but an earlier renderer produced data");
        if (data.trim() === "") data = {};
        else {
          try {
            data = JSON.parse(data);
          } catch (e) {
            throw new RenderError(i.file, undefined, `JSON error: ${(e as Error).message}`);
          }
        }
        break;
      }
      default:
        throw new RenderError(i.file, undefined, `The renderer "${name}" is not available in brine (supported: ${SUPPORTED_RENDERERS.join(", ")})`);
    }
    first = false;
  }
  return data;
}
