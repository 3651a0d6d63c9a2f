import type { ServerResponse } from "node:http";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import {
  chunk,
  type MockUpstream,
  type RecordedRequest,
  startMockUpstream,
} from "../engine/openai/mock-upstream.ts";
import { startTestServer, type TestServer } from "../support/test-server.ts";

// Regression (security review): with `log_prompts` off (the default), an upstream's stream error
// that quoted the prompt (llama.cpp's and vLLM's "error parsing tool call: raw='...'") reached
// the server's log, once per attempt. Its client still reads it; the log names its type only.

const MODEL = "quoting-upstream";
/** What each client asks: a secret-looking prompt, and the way the upstream fails. */
const SECRET = "my credit card is 4111-1111-1111-1111 PROMPTLEAK";

let upstream: MockUpstream;
let server: TestServer;
let logText = "";

/**
 * Breaks every answer with an error event quoting the prompt: at once ("first" in the prompt),
 * or after two chunks of text.
 */
function answer(request: RecordedRequest, response: ServerResponse): void {
  const messages = request.body.messages as { content: string }[];
  const prompt = messages.at(-1)?.content ?? "";
  const error = { message: `error parsing tool call: raw='${prompt}'`, type: "server_error" };
  response.writeHead(200, { "content-type": "text/event-stream" });
  if (!prompt.includes("first"))
    for (const text of ["tok ", "tok "])
      response.write(`data: ${JSON.stringify(chunk({ content: text }))}\n\n`);
  response.end(`event: error\ndata: ${JSON.stringify(error)}\n\n`);
}

beforeAll(async () => {
  upstream = await startMockUpstream(answer);
  const logs = new PassThrough();
  logs.on("data", (data: Buffer) => {
    logText += data.toString();
  });
  const model: CatalogModel = {
    id: MODEL,
    kind: "chat",
    ownedBy: "acme",
    pricing: { kind: "chat", inputPerMillion: "1.00", outputPerMillion: "2.00" },
    contextLength: 8192,
    created: 1_700_000_100,
    engine: {
      type: "openai",
      endpoints: [{ baseUrl: upstream.baseUrl, apiKey: "sk-upstream-secret-123456" }],
      model: MODEL,
      fallbacks: [],
      maxRetries: 2,
    },
  };
  server = await startTestServer({ extraModels: [model], logDestination: logs });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

/** The request lines logged so far (one when each request ends). */
function requestLines(): number {
  return logText.split("\n").filter((line) => line.includes('"msg":"request"')).length;
}

async function ask(content: string, stream: boolean): Promise<{ status: number; text: string }> {
  const response = await fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, stream, messages: [{ role: "user", content }] }),
  });
  return { status: response.status, text: await response.text() };
}

describe("an upstream whose stream errors quote the prompt, with log_prompts off", () => {
  it.each([
    ["before any output", "first", false],
    ["before any output", "first", true],
    ["mid-answer", "mid", false],
    ["mid-answer", "mid", true],
  ])("tells the client, not the log (%s: %s, stream %s)", async (_when, mode, stream) => {
    const before = upstream.requests.length;
    const linesBefore = requestLines();
    const prompt = `${mode} ${SECRET}`;
    const { text } = await ask(prompt, stream as boolean);
    expect(text).toContain(`error parsing tool call: raw='${prompt}'`);
    // Each attempt (three before any output) and the request are logged before the answer ends.
    await vi.waitFor(() => expect(requestLines()).toBe(linesBefore + 1));
    if (mode === "first") expect(upstream.requests.length - before).toBe(3);
    expect(logText).not.toContain("PROMPTLEAK");
    expect(logText).toContain('"upstreamBody":"type server_error"');
  });
});
