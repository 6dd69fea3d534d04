/**
 * The toks a request thread has verified, per minion: a minion sends the same tok (an X9.31 signature of
 * "salt" with its key, deterministic) with each request until it signs in anew, so a tok equal to the one last
 * verified against the same accepted key needs no RSA operation.
 *
 * The tok is kept as a latin1 string, not a Buffer: a 256-byte Buffer kept per minion is an ArrayBuffer of its
 * own (~820 B of RSS with its backing store and V8 objects, measured on this box) where the string is ~270 B of
 * V8 heap, and each request thread keeps one per minion that sent it a request (issue 17).
 */
export class VerifiedToks {
  private readonly byId = new Map<string, { tok: string; pem: string }>();

  /** Whether `tok` is the one last verified for `id` while its accepted key was `pem`. */
  has(id: string, pem: string, tok: Uint8Array): boolean {
    const seen = this.byId.get(id);
    return seen !== undefined && seen.pem === pem && seen.tok.length === tok.length && seen.tok === Buffer.from(tok.buffer, tok.byteOffset, tok.length).toString("latin1");
  }

  /** `tok` was verified for `id` against its accepted key `pem` (the one kept from now on). */
  add(id: string, pem: string, tok: Uint8Array): void {
    this.byId.set(id, { tok: Buffer.from(tok.buffer, tok.byteOffset, tok.length).toString("latin1"), pem });
  }

  get size(): number {
    return this.byId.size;
  }
}
