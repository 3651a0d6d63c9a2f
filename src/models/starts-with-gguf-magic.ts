import { open } from "node:fs/promises";

/** The four bytes every GGUF file starts with. */
const ggufMagic = "GGUF";

/**
 * Whether the file at `path` starts with the GGUF magic bytes: `false` for a file shorter than
 * them. Reads those 4 bytes only. Throws the file system's error when the file cannot be opened
 * (missing, a folder, not readable).
 */
export async function startsWithGgufMagic(path: string): Promise<boolean> {
  const handle = await open(path, "r");
  try {
    const start = Buffer.alloc(ggufMagic.length);
    const { bytesRead } = await handle.read(start, 0, start.length, 0);
    return bytesRead === start.length && start.toString("latin1") === ggufMagic;
  } finally {
    await handle.close();
  }
}
