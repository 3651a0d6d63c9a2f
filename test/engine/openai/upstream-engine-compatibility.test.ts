import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import type { AppError } from "../../../src/errors/app-error.ts";
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
import {
  answerError,
  chunk,
  type MockHandler,
  type MockUpstream,
  streamText,
  textEvents,
  usageChunk,
  writeEvents,
} from "./mock-upstream.ts";

/** How servers that are "OpenAI-compatible" differ from OpenAI, and how the engine copes. */

const mock = startTestMock;

afterEach(closeEnginesAndMocks);

/** Answers 200 with an event stream whose body is `pieces`, written one by one. */
function answerStream(...pieces: (string | Buffer)[]): MockHandler {
  return (_request, response) => {
    response.writeHead(200, { "content-type": "text/event-stream" });
    for (const piece of pieces) response.write(piece);
    response.end();
  };
}

function event(data: unknown): string {
  return `data: ${JSON.stringify(data)}\n\n`;
}

/** A server that does not know `stream_options`: 400 for any body that has it, else `answer`. */
function refusingStreamOptions(answer: MockHandler): MockHandler {
  const refusal = answerError(400, {
    error: {
      message: "Unrecognized request argument supplied: stream_options",
      type: "invalid_request_error",
      param: null,
      code: null,
    },
  });
  return (request, response) =>
    "stream_options" in request.body ? refusal(request, response) : answer(request, response);
}

function sentStreamOptions(upstream: MockUpstream): boolean[];
function sentStreamOptions(request: MockUpstream["requests"][number]): boolean;
function sentStreamOptions(from: MockUpstream | MockUpstream["requests"][number]): boolean[] | boolean {
  if ("requests" in from) return from.requests.map((request) => "stream_options" in request.body);
  return "stream_options" in from.body;
}

describe("upstream engine: servers that refuse stream_options", () => {
  it("asks again at once without them, and leaves them out for that endpoint from then on (regression)", async () => {
    const upstream = await mock(refusingStreamOptions(streamText(["Hello"], { usage: undefined })));
    // No retries: asking again without stream_options is not one.
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Hello");
    // Without include_usage the server reports none: estimated, and said so.
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop", usage: { estimated: true } });
    expect(sentStreamOptions(upstream)).toEqual([true, false]);

    expect(textOf(await collectParts(engine))).toBe("Hello");
    expect(sentStreamOptions(upstream)).toEqual([true, false, false]);
    expect(engine.status()).toBe("available");
  });

  it("keeps sending them to the endpoints that take them", async () => {
    const refusing = await mock(refusingStreamOptions(streamText(["refusing"])));
    const taking = await mock(streamText(["taking"]));
    const engine = createTestEngine({ model: upstreamModel([refusing.baseUrl, taking.baseUrl]) });
    const texts: string[] = [];
    for (let index = 0; index < 4; index++) texts.push(textOf(await collectParts(engine)));
    expect(texts).toEqual(["refusing", "taking", "refusing", "taking"]);
    expect(sentStreamOptions(refusing)).toEqual([true, false, false]);
    expect(sentStreamOptions(taking)).toEqual([true, true]);
  });
});

/**
 * A server that refuses a value of the client's and quotes it (as OpenAI quotes an invalid
 * `reasoning_effort`): 400 for a user message that starts with "bad:", whatever else the body has.
 */
function quotingTheClient(answer: MockHandler): MockHandler {
  return (request, response) => {
    const messages = request.body.messages as { content: string }[];
    const content = messages.at(-1)?.content ?? "";
    if (!content.startsWith("bad:")) return answer(request, response);
    return answerError(400, {
      error: {
        message: `Invalid value: '${content}'. Supported values are: 'low', 'medium', and 'high'.`,
        type: "invalid_request_error",
        param: null,
        code: "invalid_value",
      },
    })(request, response);
  };
}

describe("upstream engine: a 400 that quotes the client's words naming stream_options or max_tokens", () => {
  it("is the client's error, and the endpoint goes on taking both fields (regression)", async () => {
    const upstream = await mock(quotingTheClient(streamText(["Hello"])));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    const quoting = chatRequest({
      maxTokens: 10,
      messages: [
        { role: "user", content: "bad: stream_options include_usage max_tokens max_completion_tokens" },
      ],
    });
    const error = (await firstError(engine, quoting)) as AppError;
    expect({ status: error.status, code: error.code }).toEqual({ status: 400, code: "invalid_value" });
    // Tried without each field it named, once: neither was what the server refused.
    expect(upstream.requests.map((request) => [sentStreamOptions(request), request.body.max_tokens])).toEqual(
      [
        [true, 10],
        [false, 10],
        [false, undefined],
      ],
    );

    // Regression: one such request switched both off for every later request to the endpoint,
    // whose answers then came without usage (estimated) and without the client's bound.
    const parts = await collectParts(engine, chatRequest({ maxTokens: 7 }));
    expect(textOf(parts)).toBe("Hello");
    // The upstream's own usage, not an estimate.
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    expect((parts.at(-1) as { usage?: object }).usage).toEqual({ promptTokens: 12, completionTokens: 1 });
    expect(upstream.requests.at(-1)?.body).toMatchObject({
      max_tokens: 7,
      stream_options: { include_usage: true },
    });
  });
});

/**
 * OpenAI's reasoning models (o-series, gpt-5): 400 for a body with `max_tokens` (they take
 * `max_completion_tokens`), and for `temperature` or `top_p` at any value.
 */
function reasoningModel(answer: MockHandler): MockHandler {
  const refuse = (param: string, message: string) =>
    answerError(400, {
      error: { message, type: "invalid_request_error", param, code: "unsupported_parameter" },
    });
  return (request, response) => {
    if ("max_tokens" in request.body)
      return refuse(
        "max_tokens",
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      )(request, response);
    for (const param of ["temperature", "top_p"])
      if (param in request.body)
        return refuse(param, `Unsupported parameter: '${param}' is not supported with this model.`)(
          request,
          response,
        );
    return answer(request, response);
  };
}

describe("upstream engine: reasoning models", () => {
  it("sends no sampling settings the client did not send, and the bound as max_completion_tokens once max_tokens is refused (regression)", async () => {
    const upstream = await mock(reasoningModel(streamText(["Thought about it"])));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    expect(textOf(await collectParts(engine, chatRequest({ maxTokens: 50 })))).toBe("Thought about it");
    expect(upstream.requests.map((request) => request.body.max_tokens)).toEqual([50, undefined]);
    expect(upstream.requests[1]?.body.max_completion_tokens).toBe(50);
    // Remembered for the endpoint: the next request goes with max_completion_tokens at once.
    expect(textOf(await collectParts(engine, chatRequest({ maxTokens: 7 })))).toBe("Thought about it");
    expect(upstream.requests).toHaveLength(3);
    expect(upstream.requests[2]?.body).toMatchObject({
      max_completion_tokens: 7,
      stream_options: { include_usage: true },
    });
    expect("max_tokens" in (upstream.requests[2]?.body ?? {})).toBe(false);
    expect(engine.status()).toBe("available");
  });

  it("passes a refused max_tokens that is only too large on to the client, without asking again", async () => {
    const upstream = await mock(
      answerError(400, {
        error: {
          message: "max_tokens is too large: 100000. This model supports at most 4096 completion tokens.",
          type: "invalid_request_error",
          param: "max_tokens",
          code: "invalid_value",
        },
      }),
    );
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    const error = (await firstError(engine, chatRequest({ maxTokens: 100_000 }))) as AppError;
    expect(error.code).toBe("invalid_value");
    expect(error.message).toContain("max_tokens is too large");
    expect(upstream.requests).toHaveLength(1);
  });
});

describe("upstream engine: llama.cpp's error events", () => {
  const contextOverflow =
    'error: {"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}\n\n';

  it("passes a context overflow before the answer on as 400 context_length_exceeded, not retried (regression)", async () => {
    const upstream = await mock(answerStream(contextOverflow, "data: [DONE]\n\n"));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "context_length_exceeded", status: 400 });
    expect((error as AppError).message).toContain("the request exceeds the available context size");
    expect(upstream.requests).toHaveLength(1);
    expect(engine.status()).toBe("available");
  });

  it("ends an answer with an error part that carries the upstream's message (regression)", async () => {
    const upstream = await mock(
      answerStream(
        event(chunk({ role: "assistant", content: "Partial" })),
        'error: {"code":500,"message":"llama_decode failed","type":"server_error"}\n\n',
        "data: [DONE]\n\n",
      ),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Partial");
    const last = parts.at(-1);
    expect(last).toMatchObject({ type: "error", error: { code: "upstream_unavailable" } });
    if (last?.type !== "error") throw new Error("no error part");
    expect(last.error.message).toContain("llama_decode failed");
  });

  it("retries an error event that is not the request's fault", async () => {
    let seen = 0;
    const upstream = await mock((request, response) =>
      seen++ === 0
        ? answerStream('error: {"code":503,"message":"loading model","type":"unavailable_error"}\n\n')(
            request,
            response,
          )
        : streamText(["loaded"])(request, response),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(textOf(await collectParts(engine))).toBe("loaded");
    expect(upstream.requests).toHaveLength(2);
  });
});

describe("upstream engine: the stream's bytes", () => {
  it("reads the answer that follows informational ones (102 Processing, 103 Early Hints) (regression)", async () => {
    const upstream = await mock((_request, response) => {
      response.writeProcessing();
      response.writeEarlyHints({ link: "</style.css>; rel=preload" });
      return writeEvents(response, textEvents(["Hello", " there"]));
    });
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Hello there");
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    // Served by the first answer, not retried after an early one taken as a failure.
    expect(upstream.requests).toHaveLength(1);
  });

  it("drops a byte order mark at the start of the stream instead of the first event (regression)", async () => {
    // The first event carries text: it is the one a BOM would make unreadable.
    const events = [chunk({ role: "assistant", content: "Hello" }), ...textEvents([" there"]).slice(1)];
    const body = `\uFEFF${events.map(event).join("")}data: [DONE]\n\n`;
    const bytes = Buffer.from(body);
    // The mark split over two writes, as a network may deliver it.
    const upstream = await mock(answerStream(bytes.subarray(0, 2), bytes.subarray(2)));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Hello there");
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
  });

  it("finishes tool calls with tool_calls when the upstream sends no finish_reason (regression)", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: null }),
        chunk({
          tool_calls: [
            { index: 0, id: "call_1", type: "function", function: { name: "get_time", arguments: "{}" } },
          ],
        }),
        usageChunk(20, 5),
      ]),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(
      engine,
      chatRequest({ tools: [{ name: "get_time" }], toolChoice: { type: "auto" } }),
    );
    expect(parts.at(-1)).toEqual({
      type: "finish",
      reason: "tool_calls",
      rawReason: undefined,
      usage: { promptTokens: 20, completionTokens: 5 },
    });
  });
});

describe("upstream engine: compressed answers", () => {
  /** A server that compresses whatever it is asked: the body of `events`, gzipped. */
  const gzipped: MockHandler = (_request, response) => {
    response.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip" });
    response.end(gzipSync(`${textEvents(["zipped"]).map(event).join("")}data: [DONE]\n\n`));
  };

  it("asks for an uncompressed answer, whatever the endpoint's own headers say", async () => {
    const upstream = await mock(streamText(["Hi"]));
    const model = upstreamModel([upstream.baseUrl]);
    if (model.engine?.type !== "openai") throw new Error("an upstream model");
    model.engine.endpoints = [
      { baseUrl: upstream.baseUrl, apiKey: undefined, headers: { "accept-encoding": "gzip, br" } },
    ];
    const engine = createTestEngine({ model });
    await collectParts(engine);
    expect(upstream.requests[0]?.headers["accept-encoding"]).toBe("identity");
  });

  it("says an answer was compressed instead of calling it empty, and does not ask that endpoint again (regression)", async () => {
    const upstream = await mock(gzipped);
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable", status: 503 });
    expect((error as AppError).message).toContain(
      "answered with Content-Encoding gzip, which Tollgate does not decode",
    );
    expect(upstream.requests).toHaveLength(1);
  });

  it("serves the request from another endpoint when one answers compressed", async () => {
    const compressing = await mock(gzipped);
    const plain = await mock(streamText(["plain"]));
    const engine = createTestEngine({ model: upstreamModel([compressing.baseUrl, plain.baseUrl]) });
    expect(textOf(await collectParts(engine))).toBe("plain");
    expect(compressing.requests).toHaveLength(1);
  });

  it("reads no message from a compressed error body, but keeps its status", async () => {
    const upstream = await mock((_request, response) => {
      response.writeHead(400, { "content-type": "application/json", "content-encoding": "gzip" });
      response.end(gzipSync(JSON.stringify({ error: { message: "bad" } })));
    });
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "invalid_value", status: 400 });
    expect((error as AppError).message).toBe("The upstream server rejected the request (HTTP 400)");
  });
});
