/**
 * A fault in Tollgate's own code while serving a request (a 500, `internal_error`) is logged once
 * with its stack, on a real server: by the engine that met it, with the request id, the model and
 * the endpoint. The HTTP layer's error handler used to log the same fault again ("request
 * failed", the cause's stack appended), so one request left two stacks in the log.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type RunningServer, startServer } from "../../src/server.ts";
import { startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

/** The text that makes the chunk mapper fail, as a bug in it would. */
const FAULT = "<trip the mapper>";
/** A prompt that makes the request's conversion fail, as a bug in the HTTP layer would. */
const EDGE_FAULT = "<trip the conversion>";

// A fault in Tollgate's own reading of an answer, simulated in the chunk mapper: it throws a
// TypeError on a chunk whose content is FAULT (as in upstream-engine-internal-fault.test.ts).
vi.mock("../../src/engine/openai/create-chunk-mapper.ts", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../src/engine/openai/create-chunk-mapper.ts")>();
  return {
    ...original,
    createChunkMapper: (secrets: readonly string[]) => {
      const mapper = original.createChunkMapper(secrets);
      const read = mapper.read.bind(mapper);
      mapper.read = (chunk, parts, event) => {
        const content = (chunk as { choices?: { delta?: { content?: unknown } }[] }).choices?.[0]?.delta
          ?.content;
        if (content === FAULT) throw new TypeError("Cannot read properties of undefined (reading 'x')");
        return read(chunk, parts, event);
      };
      return mapper;
    },
  };
});

// A fault outside any engine: converting the request throws a plain TypeError on EDGE_FAULT.
vi.mock("../../src/api/convert-chat-request.ts", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../src/api/convert-chat-request.ts")>();
  return {
    ...original,
    convertChatRequest: (body: Parameters<typeof original.convertChatRequest>[0]) => {
      if (body.messages[0]?.content === EDGE_FAULT) throw new TypeError("a bug in the HTTP layer");
      return original.convertChatRequest(body);
    },
  };
});

interface LogLine {
  level: number;
  msg: string;
  reqId?: string;
  model?: string;
  endpoint?: string;
  status?: number;
  error?: string;
  err?: { type?: string; message?: string; stack?: string };
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startFaultyServer(texts: string[]) {
  const upstream = await startMockUpstream(streamText(texts));
  cleanups.push(() => upstream.close());
  const folder = mkdtempSync(join(tmpdir(), "tollgate-internal-error-log-"));
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
  const { lines: logged, destination } = collectLogLines<LogLine>();
  const server: RunningServer = await startServer({
    config: createTestConfig({
      database: `sqlite:${join(folder, "tollgate.db")}`,
      models: [createUpstreamModelEntry("remote", upstream.baseUrl)],
    }),
    logger: { level: "info", destination },
  });
  cleanups.push(() => server.close());
  const key = server.createdKeys.starterKey;
  if (key === undefined) throw new Error("first start made no starter key");
  const ask = (stream: boolean, content = "Hi") =>
    fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "remote", stream, messages: [{ role: "user", content }] }),
    });
  return { ask, logged };
}

/** The request's lines once its own "request" line (written last, once settled) is there. */
async function linesOf(logged: LogLine[], requestId: string): Promise<LogLine[]> {
  while (!logged.some((line) => line.reqId === requestId && line.msg === "request"))
    await new Promise((resolve) => setTimeout(resolve, 10));
  return logged.filter((line) => line.reqId === requestId);
}

describe("an internal error's log lines", () => {
  it.each([
    { stream: false, texts: [FAULT, "more"] },
    { stream: true, texts: ["Hello", FAULT, "never"] },
  ])(
    "stream $stream: one line with the stack and the request id, then the request line",
    async ({ stream, texts }) => {
      const { ask, logged } = await startFaultyServer(texts);
      const response = await ask(stream);
      const body = await response.text();
      if (stream) expect(body).toContain('"code":"internal_error"');
      else expect(response.status, body).toBe(500);
      const requestId = response.headers.get("x-request-id") ?? "";
      const lines = await linesOf(logged, requestId);
      const withStack = lines.filter((line) => line.err?.stack !== undefined);
      expect(withStack, JSON.stringify(lines)).toHaveLength(1);
      expect(withStack[0]).toMatchObject({
        level: 50,
        msg: "reading an upstream answer failed in Tollgate",
        model: "remote",
        err: { type: "TypeError", message: "Cannot read properties of undefined (reading 'x')" },
      });
      expect(withStack[0]?.endpoint).toBeDefined();
      // Every other line of the request, its "request" line included, has no stack.
      expect(lines.filter((line) => line.level >= 50)).toHaveLength(1);
      expect(lines.find((line) => line.msg === "request")).toMatchObject({ error: "internal_error" });
    },
  );

  it("a fault outside any engine: logged once by the HTTP layer, with its stack and the request id", async () => {
    const { ask, logged } = await startFaultyServer(["unused"]);
    const response = await ask(false, EDGE_FAULT);
    expect(response.status, await response.text()).toBe(500);
    const lines = await linesOf(logged, response.headers.get("x-request-id") ?? "");
    const withStack = lines.filter((line) => line.err?.stack !== undefined);
    expect(withStack, JSON.stringify(lines)).toHaveLength(1);
    expect(withStack[0]).toMatchObject({
      level: 50,
      msg: "request failed",
      err: { type: "TypeError", message: "a bug in the HTTP layer" },
    });
  });
});
