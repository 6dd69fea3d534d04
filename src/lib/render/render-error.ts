/**
 * A template or data file that failed to render, with the file and 1-based line when known. The
 * message reads like Salt's SaltRenderError ("<reason>; line N" and the lines around it), plus the file. Not a
 * BrineError: its text is Salt's (pillar `_errors`, state and orchestrate returns carry it) and callers read its fields.
 */
export class RenderError extends Error {
  constructor(
    readonly file: string,
    readonly line: number | undefined,
    readonly reason: string,
    readonly context = "",
  ) {
    super(`${reason}; ${line ? `line ${line} of ` : ""}${file}${context ? `\n\n---\n${context}\n---` : ""}`);
    this.name = "RenderError";
  }
}
