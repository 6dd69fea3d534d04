/**
 * A minimal ustar archive of regular files (what rest_cherrypy's POST /keys answers: `minion.pub` and
 * `minion.pem` in a tar, written by Python's tarfile). Names are short ASCII, contents small.
 */

function octal(n: number, width: number): string {
  return n.toString(8).padStart(width - 1, "0") + "\0";
}

function header(name: string, size: number, mode: number, mtimeS: number): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, "ascii");
  h.write(octal(mode, 8), 100, "ascii");
  h.write(octal(0, 8), 108, "ascii"); // uid
  h.write(octal(0, 8), 116, "ascii"); // gid
  h.write(octal(size, 12), 124, "ascii");
  h.write(octal(mtimeS, 12), 136, "ascii");
  h.write("        ", 148, "ascii"); // checksum field counts as spaces while summing
  h.write("0", 156, "ascii"); // regular file
  h.write("ustar\0", 257, "ascii");
  h.write("00", 263, "ascii");
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, "ascii");
  return h;
}

export function tarFiles(files: { name: string; content: Buffer; mode?: number }[], mtimeS = Math.floor(Date.now() / 1000)): Buffer {
  const parts: Buffer[] = [];
  for (const f of files) {
    if (!/^[\x21-\x7e]{1,99}$/.test(f.name)) throw new Error(`tar: bad file name ${f.name}`);
    parts.push(header(f.name, f.content.length, f.mode ?? 0o644, mtimeS), f.content);
    const pad = (512 - (f.content.length % 512)) % 512;
    if (pad) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(1024)); // two zero blocks end the archive
  return Buffer.concat(parts);
}
