import { open } from "node:fs/promises";

/** The four bytes every GGUF file starts with. */
const ggufMagic = Buffer.from("GGUF", "latin1");

/** How many bytes {@link isGgufStart} needs. */
export const ggufMagicLength = ggufMagic.length;

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
    return isGgufStart(start.subarray(0, bytesRead));
  } catch {
    return false;
  } finally {
    await file.close();
  }
}

/** Whether these first bytes of a file (or of a body) are those of a GGUF file. */
export function isGgufStart(start: Uint8Array): boolean {
  return start.byteLength >= ggufMagic.length && ggufMagic.equals(start.subarray(0, ggufMagic.length));
}
