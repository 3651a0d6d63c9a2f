import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";

/** The lowercase hex SHA-256 of a file's content. */
export async function hashFile(path: string, signal?: AbortSignal): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { signal })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}
