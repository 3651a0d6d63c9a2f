/**
 * `log_level: debug` writes a line per upstream attempt: which endpoint answered, with what
 * status, how soon. Regression: debug (and trace) wrote nothing more than info, though the README
 * offers them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../../src/server.ts";
import { collectLogLines } from "../../support/collect-log-lines.ts";
import { createTestConfig, createUpstreamModelEntry } from "../../support/test-server.ts";
import { answerError, type MockUpstream, sequence, startMockUpstream, streamText } from "./mock-upstream.ts";

type LogLine = Record<string, unknown>;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function startLogged(level: string, upstream: MockUpstream) {
  const folder = mkdtempSync(join(tmpdir(), "tollgate-debug-log-"));
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
  const { lines: logged, destination } = collectLogLines<LogLine>();
  const server = await startServer({
    config: createTestConfig({
      database: `sqlite:${join(folder, "tollgate.db")}`,
      models: [createUpstreamModelEntry("remote", upstream.baseUrl)],
    }),
    logger: { level, destination },
  });
  cleanups.push(() => server.close());
  const chat = async () => {
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${server.createdKeys.starterKey}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ model: "remote", messages: [{ role: "user", content: "Hi" }] }),
    });
    await response.text();
    return response.status;
  };
  return { logged, chat };
}

describe("log_level debug", () => {
  it("writes a line for each upstream attempt, a retried one too, with its request id", async () => {
    const upstream = await startMockUpstream(
      sequence(1, answerError(503, { error: { message: "busy" } }), streamText(["Hello"])),
    );
    cleanups.push(() => upstream.close());
    const { logged, chat } = await startLogged("debug", upstream);
    expect(await chat()).toBe(200);
    const answered = logged.filter((line) => line.msg === "upstream answered");
    expect(answered.map((line) => line.status)).toEqual([503, 200]);
    for (const line of answered) {
      expect(line).toMatchObject({ level: 20, model: "remote", endpoint: upstream.baseUrl });
      expect(typeof line.headersMs).toBe("number");
      expect(typeof line.reqId).toBe("string");
    }
  });

  it("writes none at info", async () => {
    const upstream = await startMockUpstream(streamText(["Hello"]));
    cleanups.push(() => upstream.close());
    const { logged, chat } = await startLogged("info", upstream);
    expect(await chat()).toBe(200);
    expect(logged.some((line) => line.msg === "request")).toBe(true);
    expect(logged.filter((line) => line.msg === "upstream answered")).toEqual([]);
  });
});
