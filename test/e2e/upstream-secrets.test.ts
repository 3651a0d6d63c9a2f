import type { ServerResponse } from "node:http";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import {
  chunk,
  type MockUpstream,
  type RecordedRequest,
  startMockUpstream,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { startTestServer, type TestServer } from "../support/test-server.ts";

// An upstream that repeats, in its errors, the credentials Tollgate sent it: none of them may
// reach the client (or the log), whatever path the error takes. None is shaped like a credential
// (`sk-...`, `Bearer ...`, 32 characters), so only knowing the endpoint's own secrets removes them.

const MODEL = "echoing-upstream";
/** A short vLLM `--api-key`, echoed without its `Bearer`. */
const API_KEY = "vllm-local-7f3a";
/** An Azure-style `api-key` header from the endpoint's `headers`. */
const HEADER_SECRET = "azkey-9c1e2f";
/** A key in the base URL's query string. */
const QUERY_SECRET = "qs-77d1e0";
const SECRETS = [API_KEY, HEADER_SECRET, QUERY_SECRET];
/** The part of the upstream's message that is no secret and must still reach the client. */
const REASON = "may not use max_tokens above 100";
/** The upstream error body read: 64 KiB (MAX_ERROR_BODY_LENGTH in read-upstream-body.ts). */
const ERROR_BODY_LIMIT = 64 * 1024;

let upstream: MockUpstream;
let server: TestServer;
let logText = "";

/** What the upstream says back: everything it was sent, and why it refuses. */
function echo(request: RecordedRequest): string {
  const token = String(request.headers.authorization ?? "").replace(/^Bearer /, "");
  return `token ${token} with api-key ${String(request.headers["api-key"])} at ${request.url} ${REASON}`;
}

/** Each way of failing, chosen by the request's last message. */
async function answer(request: RecordedRequest, response: ServerResponse) {
  const messages = request.body.messages as { content: string }[];
  const mode = messages.at(-1)?.content;
  const error = {
    message: echo(request),
    type: "invalid_request_error",
    param: `api-key=${request.headers["api-key"]}`,
  };
  switch (mode) {
    case "status-400":
      response.writeHead(400, { "content-type": "application/json" });
      response.end(JSON.stringify({ error }));
      return;
    case "error-event":
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.end(`event: error\ndata: ${JSON.stringify({ error: { ...error, code: 400 } })}\n\n`);
      return;
    case "error-mid-stream":
      await writeEvents(response, [chunk({ role: "assistant", content: "Hello" }), { error }], {
        done: false,
      });
      return;
    case "json-error":
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { message: echo(request) } }));
      return;
    case "long-400": {
      // Cut where Tollgate stops reading, in the middle of the key: its first characters would
      // be left, and the spaces before it fold into one.
      const before = `denied ${" ".repeat(ERROR_BODY_LIMIT - "denied ".length - 6)}`;
      response.writeHead(400, { "content-type": "text/plain" });
      response.end(`${before}${API_KEY} and more`);
      return;
    }
    default:
      response.writeHead(500);
      response.end();
  }
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
      endpoints: [
        {
          baseUrl: `${upstream.baseUrl}?api-key=${QUERY_SECRET}`,
          apiKey: API_KEY,
          headers: { "api-key": HEADER_SECRET },
        },
      ],
      model: MODEL,
      fallbacks: [],
      maxRetries: 0,
    },
  };
  server = await startTestServer({ extraModels: [model], logDestination: logs });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

/** Asks for `mode` and returns the status and the whole body the client received. */
async function ask(mode: string, stream: boolean): Promise<{ status: number; text: string }> {
  const response = await fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, stream, messages: [{ role: "user", content: mode }] }),
  });
  return { status: response.status, text: await response.text() };
}

function expectNoSecret(text: string): void {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
}

describe("an upstream that repeats Tollgate's credentials in its errors", () => {
  it("was sent every secret it repeats", async () => {
    await ask("status-400", false);
    const received = upstream.requests.at(-1);
    expect(received?.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(received?.headers["api-key"]).toBe(HEADER_SECRET);
    expect(received?.url).toContain(`api-key=${QUERY_SECRET}`);
  });

  it.each([false, true])("passes on a 400's reason and param without them (stream %s)", async (stream) => {
    const { status, text } = await ask("status-400", stream);
    expect(status).toBe(400);
    expectNoSecret(text);
    const { error } = JSON.parse(text) as { error: { message: string; param: string } };
    expect(error.message).toContain(REASON);
    expect(error.message).toContain("token [redacted] with api-key [redacted]");
    expect(error.param).toBe("api-key=[redacted]");
  });

  it.each([false, true])("passes on an error event's reason without them (stream %s)", async (stream) => {
    const { status, text } = await ask("error-event", stream);
    expect(status).toBe(400);
    expectNoSecret(text);
    expect(text).toContain(REASON);
  });

  it("ends a stream whose upstream failed mid-answer with the reason, without them", async () => {
    const { status, text } = await ask("error-mid-stream", true);
    expect(status).toBe(200);
    expect(text).toContain("Hello");
    expect(text).toContain(REASON);
    expectNoSecret(text);
  });

  it("answers 503 with the reason of a mid-answer failure, without them", async () => {
    const { status, text } = await ask("error-mid-stream", false);
    expect(status).toBe(503);
    expect(text).toContain(REASON);
    expectNoSecret(text);
  });

  it.each([false, true])("passes on a 200 JSON error's reason without them (stream %s)", async (stream) => {
    const { status, text } = await ask("json-error", stream);
    expect(status).toBe(503);
    expect(text).toContain(REASON);
    expectNoSecret(text);
  });

  it("leaves not even the start of a key where a long error body is cut", async () => {
    const { status, text } = await ask("long-400", false);
    expect(status).toBe(400);
    const { error } = JSON.parse(text) as { error: { message: string } };
    expect(error.message).toBe("The upstream server rejected the request (HTTP 400): denied");
  });

  it("writes none of them to the log", async () => {
    await ask("error-mid-stream", true);
    await vi.waitFor(() => expect(logText).toContain("upstream stream failed after it started"));
    // An upstream's error message may quote the prompt: the log names its type and code only.
    expect(logText).toContain('"upstreamBody":"type invalid_request_error"');
    expect(logText).not.toContain(REASON);
    expectNoSecret(logText);
  });
});
