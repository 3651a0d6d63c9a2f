import { open } from "node:fs/promises";

/** The four bytes every GGUF file starts with. */
const ggufMagic = Buffer.from("GGUF", "latin1");

/**
 * Whether the file at `path` starts as a GGUF file does, with the four bytes `GGUF` (`false` when
 * it cannot be read): what tells a model from the login or error page a server sent with a 200.
 */
export async function startsAsGguf(path: string): Promise<boolean> {
  const file = await open(path, "r").catch(() => undefined);
  if (file === undefined) return false;
  try {
    const start = Buffer.alloc(ggufMagic.length);
    const { bytesRead } = await file.read(start, 0, start.length, 0);
    return bytesRead === ggufMagic.length && start.equals(ggufMagic);
  } catch {
    return false;
  } finally {
    await file.close();
  }
}
