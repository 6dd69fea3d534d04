/** The settings Salt's outputters read from `__opts__` (and the per-call kwargs), by their Salt names. */
export interface OutOpts {
  /** colour on or off (decided by the CLI: --force-color, --no-color, stdout a terminal) */
  color: boolean;
  /** ESC in returned text shown as "?" (Salt's strip_colors, default true) */
  strip_colors?: boolean;
  /** --out-indent / output_indent: undefined when not set; null for one line; "pretty"; a number */
  output_indent?: number | null | "pretty";
  nested_indent?: number;
  /** the highstate outputter's settings */
  state_output?: string;
  state_verbose?: boolean;
  state_output_diff?: boolean;
  state_output_profile?: boolean;
  state_output_pct?: boolean;
  state_tabular?: boolean | string;
  state_compress_ids?: boolean;
  state_output_exclude?: string[] | string;
  state_output_terse?: string[] | string;
  /** the job's arguments (the filter state_output reads exclude=/terse= from a trailing kwarg map) */
  arg?: unknown[];
  /** table outputter settings (out.table.*) */
  table?: Record<string, unknown>;
  /** the return's retcode (nested colours a failed return red) */
  _retcode?: number;
}
