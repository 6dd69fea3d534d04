/**
 * Salt's exception classes a wheel call can end in, by the names Salt prints: the failure text is
 * "Exception occurred in wheel <fun>: <Class>: <message>", so the class name is part of the reply. Not
 * BrineErrors for that reason: Salt's exception types, on the wire by name (errors.ts says which classes stay).
 */
export class SaltInvocationError extends Error {
  override readonly name = "SaltInvocationError";
}

export class CommandExecutionError extends Error {
  override readonly name = "CommandExecutionError";
}

/** Python's TypeError (a call with the wrong number of positional arguments or a value of the wrong type). */
export class PyTypeError extends Error {
  override readonly name = "TypeError";
}

/** Python's ValueError (e.g. a key size cryptography refuses). */
export class PyValueError extends Error {
  override readonly name = "ValueError";
}

/** Python's truth value of a JSON-ish argument: false, null, 0, "", [] and {} are false (Salt tests `if include_rejected:`). */
export function pyTruthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") return Object.keys(v as object).length > 0;
  return true;
}
