/** A local client of the master's control socket (runners, key notifications). */
import net from "node:net";
import path from "node:path";
import { FrameReader, frame } from "../../shared/length-framing.js";
import { CONTROL_SOCKET } from "../../shared/socket-names.js";
import { isMap } from "../../shared/protocol/msgpack.js";

export interface ControlReply {
  type: "return" | "error";
  text?: string;
  ret?: unknown;
  message?: string;
}

/**
 * Send one request; `onPrint` gets streamed output, `onJid` a runner call's job id (sent first); resolves with the
 * final reply (a return or an error).
 */
export function controlCall(sockDir: string, req: Record<string, unknown>, onPrint?: (text: string) => void, onJid?: (jid: string) => void): Promise<ControlReply> {
  return new Promise((resolve, reject) => {
    const s = net.connect(path.join(sockDir, CONTROL_SOCKET));
    const reader = new FrameReader();
    let settled = false;
    s.once("error", (e) => {
      if (!settled) reject(e);
    });
    s.on("connect", () => s.write(frame(req)));
    s.on("data", (chunk) => {
      if (settled) return;
      let msgs: unknown[];
      try {
        msgs = reader.push(chunk);
      } catch (e) {
        settled = true;
        s.destroy();
        reject(new Error(`the master's reply could not be read: ${(e as Error).message}`));
        return;
      }
      for (const m of msgs) {
        if (!isMap(m)) continue;
        if (m.type === "print") onPrint?.(typeof m.text === "string" ? m.text : String(m.text ?? ""));
        else if (m.type === "jid") {
          if (typeof m.jid === "string") onJid?.(m.jid);
        } else {
          settled = true;
          s.end();
          resolve(m as unknown as ControlReply);
          return;
        }
      }
    });
    s.on("close", () => {
      if (!settled) reject(new Error("master closed the control connection"));
    });
  });
}
