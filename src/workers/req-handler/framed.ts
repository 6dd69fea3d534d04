/** A reply value already encoded as its frame (an AES reply sealed straight into a msgpack bin, a signed clear reply). */
export class Framed {
  constructor(readonly bytes: Buffer) {}
}
