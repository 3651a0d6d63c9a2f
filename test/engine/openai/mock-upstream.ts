import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the mock received. */
export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  /** As sent: names Node's `headers` cannot hold (`__proto__`) are here too. */
  rawHeaders: string[];
  body: Record<string, unknown>;
  /** The client's port: the same on requests that shared a kept-alive connection. */
  clientPort: number | undefined;
  /** Resolves true when the client closed the request before the response was complete. */
  closedEarly: Promise<boolean>;
}

export type MockHandler = (request: RecordedRequest, response: ServerResponse) => void | Promise<void>;

/** A real HTTP server on 127.0.0.1 that plays an OpenAI-compatible upstream. */
export interface MockUpstream {
  /** `http://127.0.0.1:PORT/v1` */
  baseUrl: string;
  port: number;
  requests: RecordedRequest[];
  /** Sets how the next requests are answered. */
  handle(handler: MockHandler): void;
  /**
   * The requests for the model list (`GET .../models`), which the engine makes by itself for a
   * model without a context length: kept apart from {@link requests}, the chat requests.
   */
  modelListRequests: RecordedRequest[];
  /** Sets how the model list is answered; default: a list with no model (`{"data": []}`). */
  handleModelList(handler: MockHandler): void;
  close(): Promise<void>;
}

export async function startMockUpstream(
  handler: MockHandler = streamText(["Hello", " world"]),
): Promise<MockUpstream> {
  let current = handler;
  let currentModelList: MockHandler = answerJson({ object: "list", data: [] });
  const requests: RecordedRequest[] = [];
  const modelListRequests: RecordedRequest[] = [];
  const server: Server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const closedEarly = new Promise<boolean>((resolve) => {
      response.on("close", () => resolve(!response.writableFinished));
    });
    const recorded: RecordedRequest = {
      method: request.method ?? "",
      url: request.url ?? "",
      headers: request.headers,
      rawHeaders: request.rawHeaders,
      body: text === "" ? {} : (JSON.parse(text) as Record<string, unknown>),
      clientPort: request.socket.remotePort,
      closedEarly,
    };
    const listsModels = recorded.method === "GET" && /\/models$/.test(recorded.url.split("?")[0] ?? "");
    (listsModels ? modelListRequests : requests).push(recorded);
    try {
      await (listsModels ? currentModelList : current)(recorded, response);
    } catch {
      response.destroy();
    }
  });
  server.keepAliveTimeout = 10_000;
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    handle(next) {
      current = next;
    },
    modelListRequests,
    handleModelList(next) {
      currentModelList = next;
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, "close").catch(() => {});
    },
  };
}

/** A `chat.completion.chunk` with the given delta and finish reason. */
export function chunk(
  delta: Record<string, unknown>,
  finishReason: string | null = null,
): Record<string, unknown> {
  return {
    id: "chatcmpl-upstream",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: "upstream-model",
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

/** The usage chunk OpenAI sends last with `include_usage`. */
export function usageChunk(promptTokens: number, completionTokens: number): Record<string, unknown> {
  return {
    id: "chatcmpl-upstream",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: "upstream-model",
    choices: [],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    },
  };
}

/**
 * A whole `chat.completion` with one choice holding `message`, as an upstream answers without
 * `stream` (or ignoring it); `usage` as [prompt, completion] tokens, none when undefined.
 */
export function chatCompletion(
  message: Record<string, unknown>,
  options: { finishReason?: string; usage?: [number, number] | undefined } = {},
): Record<string, unknown> {
  const usage = options.usage;
  return {
    id: "chatcmpl-whole",
    object: "chat.completion",
    created: 1_700_000_000,
    model: "upstream-model",
    choices: [{ index: 0, message, finish_reason: options.finishReason ?? "stop" }],
    ...(usage === undefined
      ? {}
      : {
          usage: { prompt_tokens: usage[0], completion_tokens: usage[1], total_tokens: usage[0] + usage[1] },
        }),
  };
}

/** A whole completion that calls each `fn` (`{ name, arguments }`, ids `call_a`, `call_b`, ...), without usage. */
export function toolCallCompletion(
  ...functions: readonly Record<string, unknown>[]
): Record<string, unknown> {
  const toolCalls = functions.map((fn, index) => ({
    id: `call_${String.fromCharCode(97 + index)}`,
    type: "function",
    function: fn,
  }));
  return chatCompletion(
    { role: "assistant", content: null, tool_calls: toolCalls },
    { finishReason: "tool_calls" },
  );
}

/** The events of a whole streamed text answer, as OpenAI sends them. */
export function textEvents(
  texts: readonly string[],
  options: { finishReason?: string; usage?: [number, number] | undefined } = {},
): Record<string, unknown>[] {
  const events = [chunk({ role: "assistant", content: "" })];
  for (const text of texts) events.push(chunk({ content: text }));
  events.push(chunk({}, options.finishReason ?? "stop"));
  const usage: [number, number] | undefined = "usage" in options ? options.usage : [12, texts.length];
  if (usage !== undefined) events.push(usageChunk(usage[0], usage[1]));
  return events;
}

/** Writes events as an SSE response, optionally `delayMs` apart, then `[DONE]` and the end. */
export async function writeEvents(
  response: ServerResponse,
  events: readonly unknown[],
  options: { delayMs?: number; done?: boolean; end?: boolean } = {},
): Promise<void> {
  if (!response.headersSent) {
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  }
  for (const event of events) {
    if (response.destroyed) return;
    response.write(`data: ${JSON.stringify(event)}\n\n`);
    if (options.delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
  }
  if (options.done ?? true) response.write("data: [DONE]\n\n");
  if (options.end ?? true) response.end();
}

/** A handler that writes `events` (no [DONE]) and then resets the connection, mid-answer. */
export function resetAfter(events: readonly unknown[]): MockHandler {
  return async (_request, response) => {
    await writeEvents(response, events, { done: false, end: false });
    setTimeout(() => response.socket?.destroy(), 20);
  };
}

/** A handler that streams `texts` as a complete answer with usage. */
export function streamText(
  texts: readonly string[],
  options: Parameters<typeof textEvents>[1] = {},
): MockHandler {
  return (_request, response) => writeEvents(response, textEvents(texts, options));
}

/** A handler that answers with an error status and body. */
export function answerError(
  status: number,
  body: unknown = { error: { message: "upstream says no", type: "server_error", code: null, param: null } },
  headers: Record<string, string> = {},
): MockHandler {
  return (_request, response) => {
    response.writeHead(status, { "content-type": "application/json", ...headers });
    response.end(JSON.stringify(body));
  };
}

/** A handler that answers 200 with `body` as it is, labelled `contentType`. */
export function answerAs(contentType: string, body: string): MockHandler {
  return (_request, response) => {
    response.writeHead(200, { "content-type": contentType });
    response.end(body);
  };
}

/** A handler that answers 200 with `body` as JSON. */
export function answerJson(body: unknown, contentType = "application/json"): MockHandler {
  return answerAs(contentType, JSON.stringify(body));
}

/** Answers the first `count` requests with `first`, the rest with `then`. */
export function sequence(count: number, first: MockHandler, then: MockHandler): MockHandler {
  let seen = 0;
  return (request, response) => (seen++ < count ? first(request, response) : then(request, response));
}
