import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { type RunningServer, startServer } from "../../../src/server.ts";
import { createTestConfig, createUpstreamModelEntry } from "../../support/test-server.ts";
import { type MockUpstream, startMockUpstream } from "./mock-upstream.ts";

/** The one model of {@link useUpstreamOnlyServer}'s server. */
export const UPSTREAM_MODEL = "upstream-chat";

const databaseFileIn = (folder: string) => join(folder, "tollgate.db");

/**
 * A Tollgate server whose only model, {@link UPSTREAM_MODEL}, is served by a new mock upstream,
 * with a fresh SQLite file and no local model (nothing to load): started before the file's tests
 * and closed after them, as useTestServer does. The accessors answer once the tests run; each test
 * sets the upstream's answer with `upstream().handle(...)`.
 */
export function useUpstreamOnlyServer(): {
  server: () => RunningServer;
  upstream: () => MockUpstream;
  /** The server's SQLite file. */
  databaseFile: () => string;
} {
  let folder: string | undefined;
  let upstream: MockUpstream | undefined;
  let server: RunningServer | undefined;
  beforeAll(async () => {
    folder = mkdtempSync(join(tmpdir(), "tollgate-upstream-only-"));
    upstream = await startMockUpstream();
    server = await startServer({
      config: createTestConfig({
        database: `sqlite:${databaseFileIn(folder)}`,
        models: [createUpstreamModelEntry(UPSTREAM_MODEL, upstream.baseUrl)],
      }),
      logger: false,
    });
  });
  afterAll(async () => {
    await server?.close();
    await upstream?.close();
    if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined)
      throw new Error("the upstream-only server is not started (use it within a test)");
    return value;
  };
  return {
    server: () => started(server),
    upstream: () => started(upstream),
    databaseFile: () => databaseFileIn(started(folder)),
  };
}

/**
 * Sends `POST /v1/chat/completions` to `server` with its starter key: a "Hi" to
 * {@link UPSTREAM_MODEL}, with `fields` added (`stream`, `stream_options`, ...).
 */
export function postChat(server: RunningServer, fields: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${server.createdKeys.starterKey}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ model: UPSTREAM_MODEL, messages: [{ role: "user", content: "Hi" }], ...fields }),
  });
}
