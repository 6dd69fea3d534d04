/**
 * Child process of lmdb-check.ts: opens the LMDB environment `argv[2]` read-only, reads every key and value of
 * every named database and decodes each value as the master does (CBOR), then exits 0. A torn page or a
 * truncated file ends this process, never the master: an LMDB error or a value that does not decode exits 3
 * with the reason on the last line of stdout; a wild pointer ends it by a signal, which the parent sees.
 */
import { open } from "lmdb";

const [dir, mapBytes] = [process.argv[2]!, Number(process.argv[3])];
let where = "the main database";
try {
  const root = open({ path: dir, readOnly: true, mapSize: mapBytes, maxDbs: 64, encoding: "binary", compression: false });
  let records = 0;
  const names: string[] = [];
  for (const { key } of root.getRange()) {
    records++;
    names.push(String(key));
  }
  for (const name of names) {
    where = `database ${name}`;
    const raw = root.openDB({ name, encoding: "binary" });
    const decoder = (root.openDB({ name, encoding: "cbor" as unknown as "msgpack" }) as unknown as { decoder: { decode(b: Uint8Array): unknown } }).decoder;
    for (const { key, value } of raw.getRange()) {
      records++;
      where = `database ${name}, key ${JSON.stringify(String(key)).slice(0, 120)}`;
      decoder.decode(value as Uint8Array);
    }
  }
  await root.close();
  process.stdout.write(`${records} records read\n`);
  process.exit(0);
} catch (e) {
  process.stdout.write(`${where}: ${(e as Error).message.split("\n")[0]}\n`);
  process.exit(3);
}
