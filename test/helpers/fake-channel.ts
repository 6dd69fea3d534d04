/** A peer channel that records what is sent and lets a test deliver messages to the handlers (cluster units). */
export class FakeChannel {
  sent: { to: string; channel: string; payload: Uint8Array }[] = [];
  handlers = new Map<string, (m: { from: string; payload: Uint8Array }) => unknown>();
  constructor(readonly peers: string[]) {}
  send(to: string, channel: string, payload: Uint8Array): void {
    this.sent.push({ to, channel, payload });
  }
  upPeers(): string[] {
    return this.peers;
  }
  on(channel: string, h: (m: { from: string; payload: Uint8Array }) => unknown): () => void {
    this.handlers.set(channel, h);
    return () => this.handlers.delete(channel);
  }
}
