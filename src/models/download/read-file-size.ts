import { stat } from "node:fs/promises";

/** The size in bytes of the file at `path`; 0 when there is none (or it is not a file). */
export async function readFileSize(path: string): Promise<number> {
  const found = await stat(path).catch(() => undefined);
  return found?.isFile() ? found.size : 0;
}
