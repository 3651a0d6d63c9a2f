import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import type { EngineLogger } from "../../../src/engine/create-engine.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import {
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
  answerJson,
  chunk,
  sequence,
  streamText,
  usageChunk,
  writeEvents,
} from "./mock-upstream.ts";

const mock = startTestMock;

afterEach(closeEnginesAndMocks);

/** A logger that keeps its warn lines. */
function recordingLogger(): EngineLogger & { warnings: Record<string, unknown>[] } {
  const warnings: Record<string, unknown>[] = [];
  return {
    warnings,
    info: () => {},
    warn: (object) => {
      warnings.push(object as Record<string, unknown>);
    },
    error: () => {},
  };
}

function messageOf(error: unknown): string {
  expect(error).toBeInstanceOf(AppError);
  return (error as AppError).message;
}

const QUOTA = {
  error: {
    message: "You exceeded your current quota, please check your plan and billing details.",
    type: "insufficient_quota",
    param: null,
    code: "insufficient_quota",
  },
};

describe("upstream engine: what clients read of an upstream's error", () => {
  // Regression: the body was cut at 64 KiB, did not parse, and its raw text became the message.
  it("passes on only the message of an error body over the bound, never its trace", async () => {
    const trace = `Traceback (most recent call last): File "/srv/secret-svc/app/handlers.py", line 88; db=postgres://svc@db-primary.internal:5432/prod${" frame".repeat(20_000)}`;
    const upstream = await mock(
      answerError(400, {
        error: { message: "Invalid request", type: "invalid_request_error", debug: { trace } },
      }),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "invalid_value", status: 400 });
    expect(messageOf(error)).toBe("The upstream server rejected the request (HTTP 400): Invalid request");
  });

  // Regression: a 200 KB message came out as "[redacted]".
  it("says a message too long to read is so", async () => {
    const upstream = await mock(answerError(400, { error: { message: "X".repeat(200_000) } }));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(messageOf(await firstError(engine))).toBe(
      "The upstream server rejected the request (HTTP 400); its error message is too long to read",
    );
  });

  // Regression: the upstream's own URL, repeated in its 400, reached the client.
  it("names the upstream's own server 'the upstream server', its secrets redacted", async () => {
    const upstream = await mock((request, response) => {
      response.writeHead(400, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          error: {
            message: `bad request to http://${request.headers.host}${request.url} (${request.headers.authorization}) on host ${request.headers.host}`,
          },
        }),
      );
    });
    const engine = createTestEngine({
      model: upstreamModel([`${upstream.baseUrl}?token=QUERYSECRET`], { apiKey: "plainsecretvalue42" }),
    });
    const message = messageOf(await firstError(engine));
    expect(message).toBe(
      "The upstream server rejected the request (HTTP 400): bad request to the upstream server/v1/chat/completions?token=[redacted] (Bearer [redacted]) on host the upstream server",
    );
    expect(message).not.toContain(String(upstream.port));
  });
});

describe("upstream engine: failures only the operator can mend", () => {
  // Regression: "is rate-limiting Tollgate (HTTP 429). Please retry later.", retry-after 1.
  it("reads a 429 insufficient_quota as an account without credit, not to be retried by the client", async () => {
    const upstream = await mock(answerError(429, QUOTA));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 2 },
    });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable", status: 503, retryable: false });
    expect(messageOf(error)).toBe(
      "The upstream server of the model 'remote' says the upstream account's quota or credit is exhausted (HTTP 429 insufficient_quota); the server's operator must top it up.",
    );
    // The same endpoint is not asked again.
    expect(upstream.requests).toHaveLength(1);
  });

  it("tries the other endpoints, then the fallbacks, when an account has no credit", async () => {
    const broke = await mock(answerError(429, QUOTA));
    const other = await mock(streamText(["from the other endpoint"]));
    const two = createTestEngine({ model: upstreamModel([broke.baseUrl, other.baseUrl], { id: "two" }) });
    expect(textOf(await collectParts(two))).toBe("from the other endpoint");
    expect(broke.requests).toHaveLength(1);

    const backupUpstream = await mock(streamText(["from the backup"]));
    const backup = createTestEngine({ model: upstreamModel([backupUpstream.baseUrl], { id: "backup" }) });
    const engine = createTestEngine({
      model: upstreamModel([broke.baseUrl], { fallbacks: ["backup"] }),
      resolveEngine: (id) => (id === "backup" ? backup : undefined),
    });
    expect(textOf(await collectParts(engine))).toBe("from the backup");
    expect(broke.requests).toHaveLength(2);
  });

  it("rests an endpoint whose account has no credit, as one that refuses the credentials", async () => {
    const upstream = await mock(answerError(429, QUOTA));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0, failureThreshold: 2, cooldownMs: 5_000 },
    });
    await firstError(engine);
    await firstError(engine);
    expect(engine.status()).toBe("unavailable");
  });

  // Regression: the message told the operator to fix the api_key, and the client to retry later.
  // Regression (review): one endpoint's wrong api_key told the client not to retry while the
  // other endpoint only rested after a 429 (retry-after 20 s), so the SDKs gave up for good.
  it("lets the client retry when another endpoint failed in a way that passes", async () => {
    const resting = await mock(answerError(429, undefined, { "retry-after": "20" }));
    const misconfigured = await mock(answerError(401, { error: { message: "bad key" } }));
    const engine = createTestEngine({
      model: upstreamModel([resting.baseUrl, misconfigured.baseUrl]),
      settings: { maxRetries: 2 },
    });
    const error = await firstError(engine);
    expect(resting.requests.length + misconfigured.requests.length).toBeGreaterThanOrEqual(2);
    expect(error).toMatchObject({ code: "upstream_unavailable", status: 503, retryable: true });
  });

  it.each([401, 403, 404])("tells the client that its retry cannot mend an upstream %i", async (status) => {
    const upstream = await mock(answerError(status, { error: { message: "no" } }));
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const error = await firstError(engine);
    expect(error).toMatchObject({ code: "upstream_unavailable", status: 503, retryable: false });
    expect(messageOf(error)).toMatch(/the server's operator must check the endpoint's \S+/);
    expect(messageOf(error)).not.toContain("retry");
  });

  // Regression: once the failure rested the endpoint, every later request was told that the
  // upstream servers were "resting for a moment. Please retry later.", with a retry-after and no
  // x-should-retry: false, so that clients retried what only the operator can mend.
  it.each([401, 404])(
    "tells later requests, while the endpoint rests for an upstream %i, what failed and not to retry",
    async (status) => {
      const upstream = await mock(answerError(status, { error: { message: "no" } }));
      const engine = createTestEngine({
        model: upstreamModel([upstream.baseUrl]),
        settings: { failureThreshold: 1, cooldownMs: 60_000 },
      });
      const first = await firstError(engine);
      const later = await firstError(engine);
      expect(upstream.requests).toHaveLength(1);
      expect(later).toMatchObject({ code: "upstream_unavailable", status: 503, retryable: false });
      expect(messageOf(later)).toBe(messageOf(first));
      expect((later as AppError).retryAfterSeconds).toBeGreaterThanOrEqual(59);
    },
  );

  it("tells later requests to retry while one endpoint rests for a fault that passes", async () => {
    const misconfigured = await mock(answerError(401, { error: { message: "no" } }));
    const failing = await mock(answerError(500, { error: { message: "down" } }));
    const engine = createTestEngine({
      model: upstreamModel([misconfigured.baseUrl, failing.baseUrl]),
      settings: { failureThreshold: 1, cooldownMs: 60_000, maxRetries: 1 },
    });
    await firstError(engine);
    const later = await firstError(engine);
    expect(misconfigured.requests.length + failing.requests.length).toBe(2);
    expect(later).toMatchObject({ code: "upstream_unavailable", retryable: true });
    expect(messageOf(later)).toContain("Please retry later");
  });
});

// Regression: the warn line said "refused Tollgate's credentials (HTTP 401)" or "answered HTTP
// 500", never what the upstream said, so a wrong key, a missing model and no credit looked alike.
describe("upstream engine: the operator's log of a failed attempt", () => {
  /** One request to an upstream that answers with `handler`, asked once: its error and log. */
  async function failOnce(handler: Parameters<typeof mock>[0]) {
    const upstream = await mock(handler);
    const logger = recordingLogger();
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      logger,
      settings: { maxRetries: 0 },
    });
    const error = await firstError(engine);
    const line = logger.warnings.find((warning) => warning.failure !== undefined);
    return { error, line, warnings: logger.warnings };
  }

  it.each([
    [
      401,
      {
        error: { message: "Incorrect API key provided: sk-upstream-secret-123456", code: "invalid_api_key" },
      },
      "code invalid_api_key: Incorrect API key provided: [redacted]",
    ],
    [
      404,
      { error: { message: "The model `gpt-9` does not exist", code: "model_not_found" } },
      "code model_not_found: The model `gpt-9` does not exist",
    ],
    [429, QUOTA, `type ${QUOTA.error.type}, code ${QUOTA.error.code}: ${QUOTA.error.message}`],
  ])("quotes the message, type and code of a %i's error body, redacted", async (status, body, quoted) => {
    const { line } = await failOnce(answerError(status, body));
    expect(line?.upstreamBody).toBe(quoted);
  });

  it("quotes an account status's body whole where it is not JSON", async () => {
    const { line } = await failOnce((_request, response) => {
      response.writeHead(401, { "content-type": "text/html" });
      response.end("<html>401 Authorization Required</html>");
    });
    expect(line?.upstreamBody).toBe("<html>401 Authorization Required</html>");
  });

  // Regression (review): an account status's body was quoted whole, and its other fields may
  // carry the request, without log_prompts.
  it("quotes none of an account status's other fields, which may carry the request", async () => {
    const { line, warnings } = await failOnce(
      answerError(401, {
        error: { code: 401, message: "No auth credentials found", metadata: { echo: "SECRET-PROMPT" } },
      }),
    );
    expect(line?.upstreamBody).toBe("code 401: No auth credentials found");
    expect(JSON.stringify(warnings)).not.toContain("SECRET-PROMPT");
  });

  // Regression (review): OpenRouter's moderation 403 (the flagged input in `metadata`) was taken
  // for refused credentials: the client got 503 "check the endpoint's api_key" and never learnt
  // its input was flagged, the log quoted the prompt, and three flagged prompts rested the endpoint.
  it("tells the client of a moderation 403, without resting the endpoint or logging the input", async () => {
    const moderation = {
      error: {
        code: 403,
        message: "Your chosen model requires moderation and your input was flagged",
        metadata: { reasons: ["violence"], flagged_input: "SECRET-PROMPT of the client" },
      },
    };
    const upstream = await mock(answerError(403, moderation));
    const logger = recordingLogger();
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      logger,
      settings: { maxRetries: 0, failureThreshold: 1 },
    });
    for (let attempt = 0; attempt < 3; attempt++) {
      const error = await firstError(engine);
      expect(error).toMatchObject({ status: 400, code: "invalid_value" });
      expect(messageOf(error)).toContain("your input was flagged");
    }
    expect(engine.endpoints?.()).toEqual({ total: 1, resting: 0 });
    expect(JSON.stringify(logger.warnings)).not.toContain("SECRET-PROMPT");
  });

  it("quotes no body of a refusal of the request, which may repeat the prompt", async () => {
    const { error, line } = await failOnce(
      answerError(422, { detail: [{ msg: "Input should be a valid string", input: "the client's prompt" }] }),
    );
    expect(error).toMatchObject({ status: 400 });
    expect(line).toBeDefined();
    expect(JSON.stringify(line)).not.toContain("the client's prompt");
  });

  // Regression (review): a 500 that repeated the prompt (or the model's output: Ollama's "error
  // parsing tool call: raw='...'") was logged whole on every attempt, without log_prompts.
  it("names only the type and code of a server error, whose text may repeat the prompt", async () => {
    const { line, warnings } = await failOnce(
      answerError(500, {
        error: { message: "raw='SECRET-PROMPT my ssn is 123'", type: "server_error", code: "E1" },
      }),
    );
    expect(line?.upstreamBody).toBe("type server_error, code E1");
    expect(JSON.stringify(warnings)).not.toContain("SECRET-PROMPT");
  });

  it("cuts a long body short on one line", async () => {
    const { line } = await failOnce((_request, response) => {
      response.writeHead(429, { "content-type": "text/html" });
      response.end(`<html>\n<body>${"slow down ".repeat(200)}</body></html>`);
    });
    const quoted = line?.upstreamBody;
    expect(typeof quoted).toBe("string");
    expect((quoted as string).length).toBe(500);
    expect(quoted).toMatch(/^<html> <body>slow down slow down .*…$/);
  });
});

describe("upstream engine: an answer that holds no completion", () => {
  // Regression: reported as "closed the stream before sending anything".
  it("says that a JSON answer is not a chat completion", async () => {
    const upstream = await mock(answerJson({ hello: "world" }));
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    expect(messageOf(await firstError(engine))).toBe(
      "The upstream server of the model 'remote' answered with JSON that is not a chat completion. Please retry later.",
    );
  });

  // Regression: a stream of nothing but [DONE] became an empty answer with finish_reason "stop".
  it("fails a stream of nothing but [DONE], and retries it", async () => {
    const onlyDone = (_request: unknown, response: ServerResponse) => writeEvents(response, []);
    const upstream = await mock(onlyDone);
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxRetries: 0 },
    });
    expect(messageOf(await firstError(engine))).toBe(
      "The upstream server of the model 'remote' ended the stream ([DONE]) without sending any chunk. Please retry later.",
    );

    upstream.handle(sequence(1, onlyDone, streamText(["second time"])));
    const retrying = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    expect(textOf(await collectParts(retrying))).toBe("second time");
  });

  // Some upstreams never send a finish reason (Gemini proxies: null throughout; older Ollama: ""):
  // chunks without one are an empty answer, not a failure asked three times.
  it("passes on chunks that carry no finish reason as an empty answer", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, [chunk({ role: "assistant", content: "" }), usageChunk(5, 0)]),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("");
    expect(parts.at(-1)).toMatchObject({ type: "finish" });
    expect(upstream.requests).toHaveLength(1);
  });

  it("still passes on an empty completion that has its finish reason", async () => {
    const upstream = await mock((_request, response) =>
      writeEvents(response, [chunk({ role: "assistant", content: "" }), chunk({}, "stop"), usageChunk(5, 0)]),
    );
    const engine = createTestEngine({ model: upstreamModel([upstream.baseUrl]) });
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("");
    expect(parts.at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    expect(upstream.requests).toHaveLength(1);
  });
});
