/** A local client of the master's control socket (runners, key notifications). */
import net from "node:net";
import path from "node:path";
import { FrameReader, frame } from "../transport/length-framing.js";
import { CONTROL_SOCKET } from "../master/control-server.js";

export interface ControlReply {
  type: "print" | "return" | "error";
  text?: string;
  ret?: unknown;
  message?: string;
}

/** Send one request; `onPrint` gets streamed output; resolves with the final reply. */
export function controlCall(sockDir: string, req: Record<string, unknown>, onPrint?: (text: string) => void): Promise<ControlReply> {
  return new Promise((resolve, reject) => {
    const s = net.connect(path.join(sockDir, CONTROL_SOCKET));
    const reader = new FrameReader();
    let settled = false;
    s.once("error", (e) => {
      if (!settled) reject(e);
    });
    s.on("connect", () => s.write(frame(req)));
    s.on("data", (chunk) => {
      for (const m of reader.push(chunk) as ControlReply[]) {
        if (m.type === "print") onPrint?.(m.text ?? "");
        else {
          settled = true;
          s.end();
          resolve(m);
        }
      }
    });
    s.on("close", () => {
      if (!settled) reject(new Error("master closed the control connection"));
    });
  });
}
