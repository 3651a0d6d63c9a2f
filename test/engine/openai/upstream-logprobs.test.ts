import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ErrorBody, TestServer } from "../../support/test-server.ts";
import { chatCompletion, chunk, type MockUpstream, usageChunk, writeEvents } from "./mock-upstream.ts";
import { startUpstreamTestServer } from "./start-upstream-test-server.ts";

/**
 * `logprobs` through a real server and a real mock upstream over HTTP: asked for upstream as the
 * client asked, and the upstream's `choices[].logprobs` given to the client as OpenAI shapes them,
 * in each streamed chunk and in a whole completion; nothing changes for a client that did not ask.
 */

const REMOTE = "acme/remote-logprobs";
/** An upstream model whose only endpoint refuses connections, with the local model as fallback. */
const DOWN_WITH_LOCAL_FALLBACK = "acme/down-logprobs";

let upstream: MockUpstream;
let server: TestServer;

beforeAll(async () => {
  ({ upstream, server } = await startUpstreamTestServer({ remote: REMOTE, down: DOWN_WITH_LOCAL_FALLBACK }));
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

beforeEach(() => {
  upstream.requests.length = 0;
});

/** One token's entry as OpenAI sends it. */
function token(text: string, logprob: number, top: [string, number][] = []) {
  const bytes = (value: string) => [...Buffer.from(value, "utf8")];
  return {
    token: text,
    logprob,
    bytes: bytes(text),
    top_logprobs: top.map(([other, value]) => ({ token: other, logprob: value, bytes: bytes(other) })),
  };
}

const HELLO = token("Hello", -0.25, [
  ["Hello", -0.25],
  ["Hi", -1.5],
]);
const WORLD = token(" world", -0.5, [
  [" world", -0.5],
  [" there", -1.25],
]);

/** A chunk of `content` with the log probabilities of its tokens. */
function logprobsChunk(content: string, tokens: unknown[] | null, extra: Record<string, unknown> = {}) {
  const event = chunk({ content });
  const [choice] = event.choices as Record<string, unknown>[];
  return { ...event, choices: [{ ...choice, logprobs: { content: tokens, refusal: null, ...extra } }] };
}

function answerEvents(events: unknown[]) {
  return (_request: unknown, response: ServerResponse) => writeEvents(response, events);
}

function post(body: Record<string, unknown>, key = server.starterKey): Promise<Response> {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: REMOTE, messages: [{ role: "user", content: "Hi" }], ...body }),
  });
}

/** The data of each event of a stream, parsed; `[DONE]` as the string. */
async function readEvents(response: Response): Promise<unknown[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((event) => event !== "")
    .map((event) => {
      const data = event.replace(/^data: /, "");
      return data === "[DONE]" ? data : JSON.parse(data);
    });
}

/** The `choices[0]` of each chunk event, without the stream's identity. */
function choicesOf(events: unknown[]): unknown[] {
  return events
    .filter((event): event is { choices: unknown[] } => typeof event === "object" && event !== null)
    .filter((event) => event.choices.length > 0)
    .map((event) => event.choices[0]);
}

describe("logprobs from an upstream model", () => {
  it("asks the upstream for them and gives each streamed chunk the log probabilities of its tokens", async () => {
    upstream.handle(
      answerEvents([
        chunk({ role: "assistant", content: "" }),
        logprobsChunk("Hello", [HELLO]),
        // llama.cpp's server adds each token's id: left out.
        logprobsChunk(" world", [{ id: 1917, ...WORLD }]),
        chunk({}, "stop"),
        usageChunk(9, 2),
      ]),
    );
    const response = await post({ stream: true, logprobs: true, top_logprobs: 2 });
    expect(response.status).toBe(200);
    const events = await readEvents(response);
    expect(upstream.requests[0]?.body).toMatchObject({ logprobs: true, top_logprobs: 2 });
    expect(choicesOf(events)).toEqual([
      { index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
      {
        index: 0,
        delta: { content: "Hello" },
        logprobs: { content: [HELLO], refusal: null },
        finish_reason: null,
      },
      {
        index: 0,
        delta: { content: " world" },
        logprobs: { content: [WORLD], refusal: null },
        finish_reason: null,
      },
      { index: 0, delta: {}, logprobs: null, finish_reason: "stop" },
    ]);
    expect(events.at(-1)).toBe("[DONE]");
  });

  it("gives a whole completion the log probabilities of all its tokens, in order", async () => {
    upstream.handle(
      answerEvents([
        chunk({ role: "assistant", content: "" }),
        logprobsChunk("Hello", [HELLO]),
        logprobsChunk(" world", [WORLD]),
        chunk({}, "stop"),
        usageChunk(9, 2),
      ]),
    );
    const response = await post({ logprobs: true, top_logprobs: 2 });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: unknown[] };
    expect(body.choices).toEqual([
      {
        index: 0,
        message: { role: "assistant", content: "Hello world", refusal: null },
        logprobs: { content: [HELLO, WORLD], refusal: null },
        finish_reason: "stop",
      },
    ]);
  });

  it("passes on the log probabilities of an upstream that answers with one JSON completion", async () => {
    const completion = chatCompletion({ role: "assistant", content: "Hello world" }, { usage: [9, 2] });
    const [choice] = completion.choices as Record<string, unknown>[];
    upstream.handle((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          ...completion,
          choices: [{ ...choice, logprobs: { content: [HELLO, WORLD], refusal: null } }],
        }),
      );
    });
    const response = await post({ logprobs: true });
    expect(response.status).toBe(200);
    expect(upstream.requests[0]?.body).toMatchObject({ logprobs: true });
    expect(upstream.requests[0]?.body).not.toHaveProperty("top_logprobs");
    const body = (await response.json()) as { choices: { logprobs: unknown }[] };
    expect(body.choices[0]?.logprobs).toEqual({ content: [HELLO, WORLD], refusal: null });
  });

  it("sends the tokens of a refusal as OpenAI does, under `refusal`", async () => {
    const sorry = token("Sorry", -0.125);
    const event = chunk({ refusal: "Sorry" });
    const [choice] = event.choices as Record<string, unknown>[];
    upstream.handle(
      answerEvents([
        { ...event, choices: [{ ...choice, logprobs: { content: null, refusal: [sorry] } }] },
        chunk({}, "stop"),
      ]),
    );
    const events = await readEvents(await post({ stream: true, logprobs: true }));
    expect(choicesOf(events)[1]).toEqual({
      index: 0,
      delta: { refusal: "Sorry" },
      logprobs: { content: null, refusal: [sorry] },
      finish_reason: null,
    });
  });

  it("sends the tokens of a chunk that showed no text with the next text (a character in two tokens)", async () => {
    // vLLM holds the first byte of "é" until the second comes: its token's chunk has no text.
    const first = { token: "bytes:\\xc3", logprob: -0.5, bytes: [0xc3], top_logprobs: [] };
    const second = { token: "bytes:\\xa9", logprob: -0.25, bytes: [0xa9], top_logprobs: [] };
    upstream.handle(
      answerEvents([logprobsChunk("", [first]), logprobsChunk("é", [second]), chunk({}, "stop")]),
    );
    const events = await readEvents(await post({ stream: true, logprobs: true }));
    expect(choicesOf(events).slice(1)).toEqual([
      {
        index: 0,
        delta: { content: "é" },
        logprobs: { content: [first, second], refusal: null },
        finish_reason: null,
      },
      { index: 0, delta: {}, logprobs: null, finish_reason: "stop" },
    ]);
  });

  it("drops log probabilities that are malformed, and answers the rest", async () => {
    upstream.handle(
      answerEvents([
        logprobsChunk("Hello", [{ ...HELLO, logprob: "very likely" }]),
        logprobsChunk(" big", [{ ...WORLD, bytes: [300] }]),
        {
          ...chunk({ content: " world" }),
          choices: [{ index: 0, delta: { content: " world" }, logprobs: "none" }],
        },
        logprobsChunk("!", [token("!", -0.75)]),
        chunk({}, "stop"),
      ]),
    );
    const response = await post({ logprobs: true });
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      choices: { message: { content: string }; logprobs: unknown }[];
    };
    expect(body.choices[0]?.message.content).toBe("Hello big world!");
    expect(body.choices[0]?.logprobs).toEqual({ content: [token("!", -0.75)], refusal: null });
  });

  it("changes nothing for a client that did not ask, whatever the upstream sends", async () => {
    upstream.handle(
      answerEvents([
        chunk({ role: "assistant", content: "" }),
        logprobsChunk("Hello", [HELLO]),
        chunk({}, "stop"),
      ]),
    );
    for (const asked of [{}, { logprobs: false }, { logprobs: null }]) {
      upstream.requests.length = 0;
      const events = await readEvents(await post({ stream: true, ...asked }));
      expect(upstream.requests[0]?.body).not.toHaveProperty("logprobs");
      expect(upstream.requests[0]?.body).not.toHaveProperty("top_logprobs");
      expect(choicesOf(events).map((choice) => (choice as { logprobs: unknown }).logprobs)).toEqual([
        null,
        null,
        null,
      ]);
      const body = (await (await post(asked)).json()) as { choices: unknown[] };
      expect(body.choices).toEqual([
        {
          index: 0,
          message: { role: "assistant", content: "Hello", refusal: null },
          logprobs: null,
          finish_reason: "stop",
        },
      ]);
    }
  });

  it("is refused by a local fallback, which cannot give them", async () => {
    const response = await post({ model: DOWN_WITH_LOCAL_FALLBACK, logprobs: true });
    const body = (await response.json()) as ErrorBody;
    expect(response.status).toBe(503);
    expect(body.error.code).toBe("upstream_unavailable");
    expect(body.error.message).toContain("does not give log probabilities");
  });
});

describe("an upstream stream that ends with the whole answer again", () => {
  it("passes each token's log probabilities once (regression: twice, the whole answer's after the chunks')", async () => {
    const whole = chatCompletion({ role: "assistant", content: "Hello world" }, { usage: [5, 2] });
    const [choice] = whole.choices as Record<string, unknown>[];
    upstream.handle(
      answerEvents([
        logprobsChunk("Hello", [HELLO]),
        logprobsChunk(" world", [WORLD]),
        { ...whole, choices: [{ ...choice, logprobs: { content: [HELLO, WORLD], refusal: null } }] },
      ]),
    );
    const response = await post({ logprobs: true, top_logprobs: 2 });
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      choices: { message: { content: string }; logprobs: { content: { token: string }[] } }[];
    };
    expect(body.choices[0]?.message.content).toBe("Hello world");
    expect(body.choices[0]?.logprobs.content.map((entry) => entry.token)).toEqual(["Hello", " world"]);
  });
});
