import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ErrorBody, TestServer } from "../../support/test-server.ts";
import type { MockUpstream } from "./mock-upstream.ts";
import { startUpstreamTestServer } from "./start-upstream-test-server.ts";

/**
 * OpenAI's fields that only an upstream server acts on (`logit_bias`, `service_tier`,
 * `prompt_cache_key`, ...), through a real server and a real mock upstream over HTTP: they arrive
 * upstream exactly as the client sent them, in a streamed and in a whole answer; fields the client
 * did not send (or sent as null) do not appear; a local fallback that cannot apply one is skipped;
 * legacy `functions` never reach the upstream.
 */

const REMOTE = "acme/remote-extras";
/** An upstream model whose only endpoint refuses connections, with the local model as fallback. */
const DOWN_WITH_LOCAL_FALLBACK = "acme/down-extras";

/** Every passed-on field, as a client (the openai SDK, the AI SDK) sends them. */
const EXTRAS = {
  logit_bias: { "50256": -100, "1734": 5.5, "0": 0 },
  service_tier: "flex",
  prompt_cache_key: "tenant-42/summaries",
  safety_identifier: "user-7f3a",
  verbosity: "low",
  store: false,
  metadata: { team: "search", ticket: "T-1", empty: "" },
  prediction: { type: "content", content: [{ type: "text", text: "def add(a, b):\n    return a + b\n" }] },
  modalities: ["text"],
};

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

function post(body: Record<string, unknown>, key = server.starterKey): Promise<Response> {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: REMOTE, messages: [{ role: "user", content: "Hi" }], ...body }),
  });
}

/** The upstream body of the one request the mock received. */
function sentUpstream(): Record<string, unknown> {
  expect(upstream.requests).toHaveLength(1);
  return upstream.requests[0]!.body;
}

describe("upstream-only fields", () => {
  it("arrive upstream exactly as sent, with a whole answer and with a stream", async () => {
    for (const stream of [false, true]) {
      upstream.requests.length = 0;
      const response = await post({ ...EXTRAS, stream });
      expect(response.status).toBe(200);
      await response.text();
      const body = sentUpstream();
      for (const [name, value] of Object.entries(EXTRAS)) expect(body[name]).toEqual(value);
      // Tollgate's own fields are its own still.
      expect(body).toMatchObject({ model: REMOTE, stream: true, stream_options: { include_usage: true } });
    }
  });

  it("go one by one as sent, a prediction as a string too, beside the fields Tollgate sets", async () => {
    const each: Record<string, unknown>[] = [
      { service_tier: "default" },
      { logit_bias: { "198": 100 } },
      { prediction: { type: "content", content: "the whole file" } },
      { modalities: ["text"] },
      { store: false, metadata: {} },
      { verbosity: "high", reasoning_effort: "minimal", user: "u-1" },
    ];
    for (const fields of each) {
      upstream.requests.length = 0;
      const response = await post({ ...fields, temperature: 0.5 });
      expect(response.status).toBe(200);
      expect(sentUpstream()).toEqual({
        model: REMOTE,
        messages: [{ role: "user", content: "Hi" }],
        stream: true,
        stream_options: { include_usage: true },
        temperature: 0.5,
        ...fields,
      });
    }
  });

  it("do not appear upstream when not sent, or sent as null", async () => {
    const nulls = Object.fromEntries(Object.keys(EXTRAS).map((name) => [name, null]));
    for (const fields of [{}, nulls]) {
      upstream.requests.length = 0;
      expect((await post(fields)).status).toBe(200);
      expect(sentUpstream()).toEqual({
        model: REMOTE,
        messages: [{ role: "user", content: "Hi" }],
        stream: true,
        stream_options: { include_usage: true },
      });
    }
  });

  it("with a bad shape are refused with 400 before anything goes upstream", async () => {
    const response = await post({ logit_bias: { "50256": -101 } });
    const body = (await response.json()) as ErrorBody;
    expect(response.status).toBe(400);
    expect(body.error).toMatchObject({ code: "invalid_value", param: "logit_bias[50256]" });
    expect(upstream.requests).toHaveLength(0);
  });

  it("ask for no output but text: other modalities are refused with 400 and nothing goes upstream", async () => {
    for (const stream of [false, true]) {
      const response = await post({ modalities: ["text", "audio"], stream });
      const body = (await response.json()) as ErrorBody;
      expect(response.status).toBe(400);
      expect(body.error).toMatchObject({ code: "invalid_value", param: "modalities" });
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it("skip a local fallback that cannot apply logit_bias", async () => {
    const response = await post({ model: DOWN_WITH_LOCAL_FALLBACK, logit_bias: { "50256": -100 } });
    const body = (await response.json()) as ErrorBody;
    expect(response.status).toBe(503);
    expect(body.error.code).toBe("upstream_unavailable");
    expect(body.error.message).toContain("local models do not apply logit_bias");
  });

  it("do not stop a local fallback from serving where it ignores them", async () => {
    const response = await post({
      model: DOWN_WITH_LOCAL_FALLBACK,
      service_tier: "flex",
      store: false,
      metadata: { a: "b" },
      prompt_cache_key: "k",
      safety_identifier: "s",
      verbosity: "low",
      modalities: ["text"],
      max_tokens: 2,
    });
    expect(response.status).toBe(200);
  });
});

describe("legacy function calling", () => {
  it("is refused with 400 naming the field, and nothing goes upstream", async () => {
    const weather = { name: "get_weather", parameters: { type: "object", properties: {} } };
    for (const [fields, param] of [
      [{ functions: [weather], function_call: "auto" }, "functions"],
      [{ functions: [weather] }, "functions"],
      [{ function_call: { name: "get_weather" } }, "function_call"],
    ] as const) {
      const response = await post(fields);
      const body = (await response.json()) as ErrorBody;
      expect(response.status).toBe(400);
      expect(body.error).toMatchObject({ code: "invalid_value", param, type: "invalid_request_error" });
      expect(body.error.message).toContain("'tools'");
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it("sent as null (a model dumped with its defaults) is no request for it", async () => {
    expect((await post({ functions: null, function_call: null })).status).toBe(200);
    expect(sentUpstream()).not.toHaveProperty("functions");
  });
});

describe("an assistant's refusal replayed in the conversation", () => {
  it("goes upstream as what the assistant said (regression: 400 for OpenAI's own answer shape)", async () => {
    const response = await post({
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: null, refusal: "I can't help with that." },
        { role: "user", content: "Why?" },
        { role: "assistant", content: [{ type: "refusal", refusal: "It is not allowed." }] },
        { role: "user", content: "Sure?" },
      ],
    });
    expect(response.status).toBe(200);
    expect(sentUpstream().messages).toEqual([
      { role: "user", content: "Hi" },
      { role: "assistant", content: "I can't help with that." },
      { role: "user", content: "Why?" },
      { role: "assistant", content: [{ type: "text", text: "It is not allowed." }] },
      { role: "user", content: "Sure?" },
    ]);
  });
});
