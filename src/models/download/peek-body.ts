/**
 * The first `length` bytes of a response body (fewer when the body is shorter) and the body
 * whole again, those bytes included, to read on: what lets a download look at what an answer
 * holds before it gives up what it has. Reading can fail as reading the body does; the body is
 * then cancelled.
 */
export async function peekBody(
  body: ReadableStream<Uint8Array>,
  length: number,
): Promise<{ head: Uint8Array; body: ReadableStream<Uint8Array> }> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < length) {
      const next = await reader.read();
      if (next.done) break;
      chunks.push(next.value);
      size += next.value.byteLength;
    }
  } catch (error) {
    await reader.cancel().catch(() => {});
    throw error;
  }
  const replayed = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
    },
    async pull(controller) {
      const next = await reader.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return { head: Buffer.concat(chunks).subarray(0, length), body: replayed };
}
