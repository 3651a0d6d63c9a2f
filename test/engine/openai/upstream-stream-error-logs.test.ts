import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import type { EngineLogger } from "../../../src/engine/create-engine.ts";
import type { ChatEngine } from "../../../src/engine/engine.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  collectParts,
  createTestEngine,
  firstError,
  startTestMock,
  textOf,
  upstreamModel,
} from "./engine-helpers.ts";
import { chunk, type MockHandler, type RecordedRequest, streamText } from "./mock-upstream.ts";

// Regression (security review): with `log_prompts` off, an error an upstream sent in its stream
// that quoted the prompt (llama.cpp's and vLLM's "error parsing tool call: raw='...'") was logged
// whole in the `failure` field, once per attempt: `"failure":"sent an error (error parsing tool
// call: raw='... my credit card 4111-1111-1111-1111 ...')"`. The client still hears it.

afterEach(closeEnginesAndMocks);

/** What the client asks, which no log line may repeat. */
const PROMPT = "my credit card is 4111-1111-1111-1111 PROMPTLEAK";

const REFUSES_STREAM_OPTIONS =
  "upstream endpoint refuses stream_options; it is asked without them from now on (usage estimated where it reports none)";

const request = () => chatRequest({ messages: [{ role: "user", content: PROMPT }] });

/** A logger that keeps every line it is given, as the JSON a log destination would hold. */
function recordingLogger(): EngineLogger & { lines: Record<string, unknown>[]; text: () => string } {
  const lines: Record<string, unknown>[] = [];
  const record = (level: string) => (object: object, message?: string) => {
    lines.push({ level, msg: message, ...object });
  };
  return {
    lines,
    text: () => JSON.stringify(lines),
    info: record("info"),
    warn: record("warn"),
    error: record("error"),
  };
}

/** The last message's text of a request the mock received. */
function promptOf(received: RecordedRequest): string {
  const messages = received.body.messages as { content: string }[];
  return messages.at(-1)?.content ?? "";
}

/**
 * An upstream whose answer breaks with an error that quotes the prompt, after `before` chunks of
 * text: sent as an `event: error` or as a chunk holding `error`, with `code` where given.
 */
function quotingError(options: { before: number; as: "event" | "chunk"; code?: number }): MockHandler {
  return (received, response: ServerResponse) => {
    const error = {
      message: `error parsing tool call: raw='${promptOf(received)}'`,
      type: "server_error",
      ...(options.code === undefined ? {} : { code: options.code }),
    };
    response.writeHead(200, { "content-type": "text/event-stream" });
    for (let index = 0; index < options.before; index++)
      response.write(`data: ${JSON.stringify(chunk({ content: "tok " }))}\n\n`);
    response.end(
      options.as === "event"
        ? `event: error\ndata: ${JSON.stringify(error)}\n\n`
        : `data: ${JSON.stringify({ error })}\n\n`,
    );
  };
}

function lineOf(logger: ReturnType<typeof recordingLogger>, message: string): Record<string, unknown>[] {
  return logger.lines.filter((line) => line.msg === message);
}

describe("upstream engine: an error the stream sent, in the log", () => {
  it.each(["event", "chunk"] as const)(
    "never logs the message of an error %s before any output, on any attempt; the client hears it",
    async (as) => {
      const upstream = await startTestMock(quotingError({ before: 0, as }));
      const logger = recordingLogger();
      const engine = createTestEngine({
        model: upstreamModel([upstream.baseUrl]),
        logger,
        settings: { maxRetries: 2 },
      });
      const error = await firstError(engine, request());
      expect(error).toBeInstanceOf(AppError);
      expect(error).toMatchObject({ code: "upstream_unavailable" });
      expect((error as AppError).message).toContain(
        `sent an error (error parsing tool call: raw='${PROMPT}')`,
      );
      expect(upstream.requests).toHaveLength(3);
      expect(logger.text()).not.toContain("PROMPTLEAK");
      const attempts = lineOf(logger, "upstream attempt failed");
      expect(attempts).toHaveLength(3);
      for (const line of attempts) expect(line).toMatchObject({ upstreamBody: "type server_error" });
    },
  );

  it.each(["event", "chunk"] as const)(
    "never logs the message of an error %s that breaks an answer under way; the client hears it",
    async (as) => {
      const upstream = await startTestMock(quotingError({ before: 2, as }));
      const logger = recordingLogger();
      const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]), logger });
      const parts = await collectParts(engine, request());
      expect(textOf(parts)).toBe("tok tok ");
      const last = parts.at(-1);
      expect(last?.type).toBe("error");
      if (last?.type !== "error") return;
      expect(last.error.message).toContain(`error parsing tool call: raw='${PROMPT}'`);
      expect(logger.text()).not.toContain("PROMPTLEAK");
      const [line] = lineOf(logger, "upstream stream failed after it started");
      expect(line).toMatchObject({ upstreamBody: "type server_error" });
    },
  );

  it("never logs the message of an error that names the request's fault (code 400); the client hears it", async () => {
    const upstream = await startTestMock(quotingError({ before: 0, as: "event", code: 400 }));
    const logger = recordingLogger();
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]), logger });
    const error = await firstError(engine, request());
    expect(error).toMatchObject({ code: "invalid_value", status: 400 });
    expect((error as AppError).message).toContain(PROMPT);
    expect(logger.text()).not.toContain("PROMPTLEAK");
    expect(lineOf(logger, "upstream attempt failed")[0]).toMatchObject({
      upstreamBody: "type server_error, code 400",
    });
  });

  it("still logs Tollgate's own words for a stream that broke the protocol", async () => {
    const upstream = await startTestMock((_received, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.end("data: {not json\n\n");
    });
    const logger = recordingLogger();
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      logger,
      settings: { maxRetries: 0 },
    });
    await firstError(engine, request());
    expect(lineOf(logger, "upstream attempt failed")[0]).toMatchObject({
      failure: "sent an error (an event that is not JSON)",
    });
  });

  it("never logs it from a fallback that failed the same way", async () => {
    const logger = recordingLogger();
    const engines = new Map<string, ChatEngine>();
    const resolveEngine = (id: string) => engines.get(id);
    for (const id of ["primary", "backup"]) {
      const upstream = await startTestMock(quotingError({ before: 0, as: "chunk" }));
      const fallbacks = id === "primary" ? ["backup"] : [];
      const model = upstreamModel([upstream.baseUrl], { id, fallbacks });
      engines.set(id, createTestEngine({ model, resolveEngine, logger, settings: { maxRetries: 1 } }));
    }
    const error = await firstError(engines.get("primary") as ChatEngine, request());
    expect((error as AppError).message).toContain(PROMPT);
    expect(logger.text()).not.toContain("PROMPTLEAK");
    expect(lineOf(logger, "fallback model failed before its first part; skipped")).toEqual([
      expect.objectContaining({ fallback: "backup", failure: "upstream_unavailable" }),
    ]);
    expect(lineOf(logger, "upstream attempt failed")).toHaveLength(4);
  });

  it("never logs the message of a refusal of stream_options that repeats the request", async () => {
    let refused = false;
    const upstream = await startTestMock((received, response) => {
      if (refused || received.body.stream_options === undefined)
        return streamText(["fine"])(received, response);
      refused = true;
      response.writeHead(400, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          error: {
            message: `Unrecognized request argument stream_options in ${JSON.stringify(received.body)}`,
            type: "invalid_request_error",
            param: "stream_options",
          },
        }),
      );
    });
    const logger = recordingLogger();
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]), logger });
    expect(textOf(await collectParts(engine, request()))).toBe("fine");
    expect(logger.text()).not.toContain("PROMPTLEAK");
    expect(lineOf(logger, REFUSES_STREAM_OPTIONS)).toEqual([
      expect.objectContaining({ upstreamBody: "type invalid_request_error" }),
    ]);
  });
});
