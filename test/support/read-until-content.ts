/**
 * Reads a streamed chat answer until its first content chunk has come (the model is generating
 * for it), and hands back the reader, the rest unread: the stream goes on holding its sequence
 * until the caller aborts it.
 */
export async function readUntilContent(response: Response): Promise<ReadableStreamDefaultReader<Uint8Array>> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes('"content":"') || text.split("data: ").length < 3) {
    const { value, done } = await reader.read();
    if (done) throw new Error("stream ended early");
    text += decoder.decode(value, { stream: true });
  }
  return reader;
}
