import { checkGgufComplete } from "../../gguf/check-gguf-complete.ts";

/**
 * What a GGUF file at `path` lacks, in words, when its header describes more data than the file
 * holds (a download cut short); `undefined` when it is whole, or when that cannot be told (a
 * tensor type not known to check-gguf-complete.ts: such a file is let through, as before).
 */
export async function findMissingGgufData(path: string): Promise<string | undefined> {
  const completeness = await checkGgufComplete(path);
  return completeness.status === "truncated" ? completeness.reason : undefined;
}
