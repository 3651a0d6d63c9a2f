/**
 * A fast OpenAI-compatible upstream for the gateway benchmark, run as its own process:
 * `node bench/gateway/mock-upstream.ts` prints `{"port": N}` once it listens on 127.0.0.1.
 *
 * `POST /v1/chat/completions` answers a fixed small completion, or with `"stream": true` an SSE
 * stream of `max_tokens` content chunks (default 5), its finish chunk, a usage chunk and
 * `[DONE]`, written at once. With `"model": "paced"` the chunks come `PACE_MS` (5 ms) apart, as a
 * real model would send them. Responses are built once per chunk count and reused.
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

const PACE_MS = 5;
const CREATED = 1_700_000_000;

const completionBody = JSON.stringify({
  id: "chatcmpl-mock",
  object: "chat.completion",
  created: CREATED,
  model: "bench",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: "one two three four five" },
      logprobs: null,
      finish_reason: "stop",
    },
  ],
  usage: { prompt_tokens: 9, completion_tokens: 5, total_tokens: 14 },
});

function event(choices: unknown[], usage?: unknown): string {
  const chunk: Record<string, unknown> = {
    id: "chatcmpl-mock",
    object: "chat.completion.chunk",
    created: CREATED,
    model: "bench",
    choices,
  };
  if (usage !== undefined) chunk.usage = usage;
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

const ROLE_EVENT = event([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]);
const CONTENT_EVENT = event([{ index: 0, delta: { content: "word " }, finish_reason: null }]);

function endEvents(chunks: number): string {
  return (
    event([{ index: 0, delta: {}, finish_reason: "stop" }]) +
    event([], { prompt_tokens: 9, completion_tokens: chunks, total_tokens: 9 + chunks }) +
    "data: [DONE]\n\n"
  );
}

const streams = new Map<number, Buffer>();
function streamBody(chunks: number): Buffer {
  let body = streams.get(chunks);
  if (body === undefined) {
    body = Buffer.from(ROLE_EVENT + CONTENT_EVENT.repeat(chunks) + endEvents(chunks));
    streams.set(chunks, body);
  }
  return body;
}

const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };

function writePaced(response: ServerResponse, chunks: number): void {
  response.writeHead(200, SSE_HEADERS);
  response.write(ROLE_EVENT);
  let sent = 0;
  const timer = setInterval(() => {
    if (response.destroyed) {
      clearInterval(timer);
      return;
    }
    if (sent < chunks) {
      response.write(CONTENT_EVENT);
      sent++;
      return;
    }
    clearInterval(timer);
    response.end(endEvents(chunks));
  }, PACE_MS);
}

const server = createServer((request, response) => {
  const pieces: Buffer[] = [];
  request.on("data", (piece: Buffer) => pieces.push(piece));
  request.on("end", () => {
    let body: { stream?: boolean; max_tokens?: number; model?: string } = {};
    try {
      body = JSON.parse(Buffer.concat(pieces).toString("utf8")) as typeof body;
    } catch {
      response.writeHead(400, { "content-type": "application/json" });
      response.end('{"error":{"message":"invalid JSON"}}');
      return;
    }
    if (body.stream !== true) {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(completionBody);
      return;
    }
    const chunks = Math.max(1, Math.min(10_000, body.max_tokens ?? 5));
    if (body.model === "paced") {
      writePaced(response, chunks);
      return;
    }
    response.writeHead(200, SSE_HEADERS);
    response.end(streamBody(chunks));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.on("SIGTERM", () => process.exit(0));
