/**
 * Salt's colour table (salt/utils/color.py get_colors over salt/utils/textformat.py): SGR sequences that
 * start with a reset ("\x1b[0;32m"); every entry is "" when colour is off.
 */
const SGR: Record<string, string> = {
  BLACK: "30",
  DARK_GRAY: "1;30",
  RED: "31",
  LIGHT_RED: "1;31",
  GREEN: "32",
  LIGHT_GREEN: "1;32",
  YELLOW: "33",
  LIGHT_YELLOW: "1;33",
  BLUE: "34",
  LIGHT_BLUE: "1;34",
  MAGENTA: "35",
  LIGHT_MAGENTA: "1;35",
  CYAN: "36",
  LIGHT_CYAN: "1;36",
  LIGHT_GRAY: "37",
  WHITE: "1;37",
  DEFAULT_COLOR: "39",
  ENDC: "0",
};

export type ColorName = keyof typeof SGR;
export type Colors = Record<string, string>;

export function getColors(use: boolean): Colors {
  const out: Colors = {};
  for (const [name, code] of Object.entries(SGR)) out[name] = use ? `\x1b[0;${code}m` : "";
  return out;
}

/** Salt's strip_esc_sequence: an ESC inside data becomes "?" so returned text cannot drive the terminal. */
export function stripEsc(s: string): string {
  return s.replaceAll("\x1b", "?");
}
