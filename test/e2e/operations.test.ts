import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { REQUEST_TIMEOUT_MS } from "../../src/api/build-app.ts";
import { MAX_LOGGED_PROMPT_CHARS } from "../../src/api/routes/chat-completions.ts";
import { startTestServer, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

const logLines: Record<string, unknown>[] = [];
const destination = new PassThrough();
destination.on("data", (data: Buffer) => {
  for (const line of data.toString().split("\n")) if (line.trim() !== "") logLines.push(JSON.parse(line));
});
const server = useTestServer({ logDestination: destination, metricsKey: "metrics-secret" });

const secretPrompt = "my very secret prompt text";

async function chat(body: Record<string, unknown> = {}) {
  const response = await fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: [{ role: "user", content: secretPrompt }],
      max_tokens: 4,
      ...body,
    }),
  });
  await response.arrayBuffer();
  return response;
}

describe("connections", () => {
  it("bounds the time a client may take to send its request, as Node does unless told otherwise", () => {
    const http = server().server.app.server;
    expect(http.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
    expect(http.headersTimeout).toBeLessThanOrEqual(REQUEST_TIMEOUT_MS);
    expect(REQUEST_TIMEOUT_MS).toBeGreaterThan(0);
  });
});

describe("health, readiness and the API description", () => {
  it("answers /health and /ready without a key", async () => {
    expect((await fetch(`${server().origin}/health`)).status).toBe(200);
    // Not ready while the model loads (503), ready once it has.
    let ready = await fetch(`${server().origin}/ready`);
    for (let attempt = 0; attempt < 100 && ready.status === 503; attempt++) {
      const body = (await ready.json()) as { reasons: string[] };
      expect(body.reasons).toEqual([`model '${TINY_MODEL}' is loading`]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      ready = await fetch(`${server().origin}/ready`);
    }
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready", reasons: [] });
  });

  it("serves /openapi.json without a key", async () => {
    const response = await fetch(`${server().origin}/openapi.json`);
    expect(response.status).toBe(200);
    const document = (await response.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(document.openapi).toBe("3.1.0");
    expect(Object.keys(document.paths)).toContain("/v1/chat/completions");
  });
});

describe("metrics", () => {
  it("needs the metrics key when one is configured", async () => {
    expect((await fetch(`${server().origin}/metrics`)).status).toBe(401);
    expect(
      (
        await fetch(`${server().origin}/metrics`, {
          headers: { authorization: `Bearer ${server().starterKey}` },
        })
      ).status,
    ).toBe(401);
    // The bearer scheme in any case and spaces around the key, as the API takes them.
    for (const authorization of [
      "bearer metrics-secret",
      "BEARER  metrics-secret ",
      "Bearer metrics-secret",
    ]) {
      expect((await fetch(`${server().origin}/metrics`, { headers: { authorization } })).status).toBe(200);
    }
    for (const authorization of [
      "Bearer metrics-secre",
      "Bearer metrics-secrets",
      "metrics-secret",
      "Bearer",
    ]) {
      expect((await fetch(`${server().origin}/metrics`, { headers: { authorization } })).status).toBe(401);
    }
  });

  it("counts requests by route, model and status, tokens, cost and time to first token", async () => {
    await chat();
    await chat({ stream: true });
    await chat({ model: "no-such-model" });
    const response = await fetch(`${server().origin}/metrics`, {
      headers: { authorization: "Bearer metrics-secret" },
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).toMatch(
      /tollgate_requests_total\{route="\/v1\/chat\/completions",model="tiny",status="200"\} 2/,
    );
    // An unknown model never becomes a label value.
    expect(text).toMatch(
      /tollgate_requests_total\{route="\/v1\/chat\/completions",model="",status="404"\} 1/,
    );
    expect(text).not.toContain("no-such-model");
    expect(text).toMatch(/tollgate_tokens_total\{model="tiny",direction="completion"\} [1-9]/);
    expect(text).toMatch(/tollgate_time_to_first_token_seconds_count\{model="tiny"\} 2/);
    expect(text).toMatch(/tollgate_gateway_overhead_seconds_count\{route="\/v1\/chat\/completions"\} 2/);
    expect(text).toMatch(/tollgate_cost_total\{model="tiny"\} \d/);
    expect(text).toContain("tollgate_requests_in_flight");
  });
});

describe("logs", () => {
  it("carry each request's messages with log_prompts: true, cut at 64 KiB", async () => {
    const lines: Record<string, unknown>[] = [];
    const destination = new PassThrough();
    destination.on("data", (data: Buffer) => {
      for (const line of data.toString().split("\n")) if (line.trim() !== "") lines.push(JSON.parse(line));
    });
    const logging = await startTestServer({ logDestination: destination, logPrompts: true });
    try {
      const send = (content: string) =>
        fetch(`${logging.baseUrl}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${logging.starterKey}`, "content-type": "application/json" },
          body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content }], max_tokens: 1 }),
        });
      const short = await send(secretPrompt);
      const long = await send("x".repeat(MAX_LOGGED_PROMPT_CHARS));
      const lineOf = async (response: Response) => {
        await response.text();
        const id = response.headers.get("x-request-id");
        for (let attempt = 0; attempt < 50 && !lines.some((line) => line.reqId === id); attempt++)
          await new Promise((resolve) => setTimeout(resolve, 20));
        return lines.find((line) => line.reqId === id);
      };
      expect((await lineOf(short))?.prompt).toBe(JSON.stringify([{ role: "user", content: secretPrompt }]));
      const cut = await lineOf(long);
      expect(String(cut?.prompt).length).toBe(MAX_LOGGED_PROMPT_CHARS);
      expect(cut?.promptChars).toBe(
        JSON.stringify([{ role: "user", content: "x".repeat(MAX_LOGGED_PROMPT_CHARS) }]).length,
      );
      // Regression: the cuts split an emoji in half, and the log line held a lone "\ud83d".
      const start = JSON.stringify([{ role: "user", content: "" }]).length - 3;
      const before = "x".repeat(MAX_LOGGED_PROMPT_CHARS - start - 1);
      const split = await lineOf(await send(`${before}😀 and more`));
      expect(split?.prompt).toBe(JSON.stringify([{ role: "user", content: before }]).slice(0, -3));
      const named = await fetch(`${logging.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${logging.starterKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: `${"m".repeat(255)}😀`, messages: [{ role: "user", content: "hi" }] }),
      });
      expect((await lineOf(named))?.model).toBe(`${"m".repeat(255)}...`);
    } finally {
      await logging.close();
    }
  });

  it("writes one JSON line per request with the key's public id, and never the prompt or a secret", async () => {
    const before = logLines.length;
    const response = await chat({ user: "someone" });
    const requestId = response.headers.get("x-request-id");
    // The line is written when the response finishes; give the stream a moment to flush.
    for (let attempt = 0; attempt < 50 && !logLines.some((line) => line.reqId === requestId); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const lines = logLines.slice(before).filter((line) => line.reqId === requestId);
    expect(lines).toHaveLength(1);
    const publicId = server().starterKey.split("-")[2];
    expect(lines[0]).toMatchObject({
      msg: "request",
      route: "/v1/chat/completions",
      status: 200,
      key: publicId,
      model: TINY_MODEL,
    });
    expect(typeof lines[0]?.completionTokens).toBe("number");
    expect(typeof lines[0]?.cost).toBe("string");
    const everything = JSON.stringify(logLines);
    expect(everything).not.toContain(secretPrompt);
    expect(everything).not.toContain(server().starterKey.split("-")[3]);
    expect(everything).not.toContain(server().adminKey.split("-")[3]);
  });

  it("never logs a key sent where something else was expected: as the model, or as the request id", async () => {
    const before = logLines.length;
    const response = await chat({ model: server().starterKey });
    expect(response.status).toBe(404);
    const sentAsId = await fetch(`${server().baseUrl}/models`, {
      headers: { authorization: `Bearer ${server().starterKey}`, "x-request-id": server().starterKey },
    });
    expect(sentAsId.status).toBe(200);
    expect(sentAsId.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{24}$/);
    for (let attempt = 0; attempt < 50 && logLines.length < before + 2; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const lines = logLines.slice(before);
    const publicId = server().starterKey.split("-")[2];
    expect(lines.find((line) => line.status === 404)?.model).toBe(`sk-tg-${publicId}-...`);
    expect(JSON.stringify(lines)).not.toContain(server().starterKey.split("-")[3]);
  });

  it("logs and counts a request whose URL cannot be decoded (regression: answered, but neither logged nor counted)", async () => {
    const counted = async () => {
      const response = await fetch(`${server().origin}/metrics`, {
        headers: { authorization: "Bearer metrics-secret" },
      });
      const line = (await response.text())
        .split("\n")
        .find((each) => each.startsWith('tollgate_requests_total{route="unknown",model="",status="400"}'));
      return line === undefined ? 0 : Number(line.split(" ").at(-1));
    };
    const before = await counted();
    const response = await fetch(`${server().baseUrl}/models/%zz`, {
      headers: { authorization: `Bearer ${server().starterKey}` },
    });
    expect(response.status).toBe(400);
    const requestId = response.headers.get("x-request-id");
    for (let attempt = 0; attempt < 50 && !logLines.some((line) => line.reqId === requestId); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(logLines.filter((line) => line.reqId === requestId)).toEqual([
      expect.objectContaining({
        msg: "request",
        status: 400,
        route: "unknown",
        error: "invalid_http_request",
      }),
    ]);
    expect(await counted()).toBe(before + 1);
  });
});

describe("a request that waits for its model to load", () => {
  it("counts the wait as engine time, not gateway overhead (regression: seconds of overhead after each start)", async () => {
    const lines: Record<string, unknown>[] = [];
    const destination = new PassThrough();
    destination.on("data", (data: Buffer) => {
      for (const line of data.toString().split("\n")) if (line.trim() !== "") lines.push(JSON.parse(line));
    });
    // Not waited for: the model is still loading when the request comes.
    const fresh = await startTestServer({ logDestination: destination });
    try {
      const response = await fetch(`${fresh.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${fresh.starterKey}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: TINY_MODEL,
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 2,
        }),
      });
      expect(response.status).toBe(200);
      await response.arrayBuffer();
      const requestId = response.headers.get("x-request-id");
      for (let attempt = 0; attempt < 50 && !lines.some((line) => line.reqId === requestId); attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const line = lines.find((each) => each.reqId === requestId && each.msg === "request");
      // The model's load (about a second here) came before anything was generated: most of the
      // request's time is the engine's.
      const loaded = lines.findIndex((each) => each.msg === "local model loaded");
      expect(loaded).toBeGreaterThanOrEqual(0);
      expect(loaded).toBeLessThan(lines.indexOf(line ?? {}));
      expect(Number(line?.engineMs)).toBeGreaterThan(Number(line?.ms) / 2);
    } finally {
      await fresh.close();
    }
  });
});
