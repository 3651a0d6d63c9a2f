import { open } from "node:fs/promises";
import type { ModelDownloadError } from "./model-download-error.ts";

/**
 * The body of an answer that starts before the end of the partial file (a `200` of the same
 * version that ignored the `Range`, as some CDNs send, or a `206` from an earlier byte), without
 * its first `count` bytes: those are compared with the partial file's bytes from `position`
 * on (a free integrity check) instead of being written again. Such an answer used to throw the
 * partial file away: a 20 MB partial file became the 1 MB that a broken `200` sent. Bytes that
 * differ throw `mismatch()`'s error (the file is not the version it claims to be). `onBytes` is
 * called for each skipped chunk, which counts as a sign of life (the stall watchdog).
 */
export function skipSavedBytes(
  body: ReadableStream<Uint8Array>,
  context: {
    path: string;
    position: number;
    count: number;
    onBytes: () => void;
    mismatch: () => Promise<ModelDownloadError>;
  },
): ReadableStream<Uint8Array> {
  async function* rest(): AsyncGenerator<Uint8Array> {
    let position = context.position;
    let remaining = context.count;
    const file = remaining > 0 ? await open(context.path, "r") : undefined;
    try {
      for await (const chunk of body) {
        if (remaining === 0) {
          yield chunk;
          continue;
        }
        const length = Math.min(remaining, chunk.byteLength);
        const saved = Buffer.alloc(length);
        const { bytesRead } = await (file as NonNullable<typeof file>).read(saved, 0, length, position);
        if (bytesRead !== length || !saved.equals(chunk.subarray(0, length))) throw await context.mismatch();
        position += length;
        remaining -= length;
        context.onBytes();
        if (length < chunk.byteLength) yield chunk.subarray(length);
      }
    } finally {
      await file?.close().catch(() => {});
    }
  }
  return ReadableStream.from(rest()) as ReadableStream<Uint8Array>;
}
