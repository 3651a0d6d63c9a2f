/**
 * A model's queue is shared fairly between accounts (fair-queue.ts): an account that sends a
 * burst no longer holds every place in the queue and every turn while another account's request
 * waits behind all of it or is refused. Over HTTP, with the keys of two accounts: a local model's
 * sequences, and an upstream endpoint's `max_connections`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { readUntilContent } from "../support/read-until-content.ts";
import { getTestModelPath } from "../support/test-model.ts";
import {
  createTinyModelEntry,
  createUpstreamModelEntry,
  readError,
  startTestServer,
  type TestServer,
  untilModelWaiting,
} from "../support/test-server.ts";
import { until } from "../support/until.ts";

/** The endless model, two sequences, two places in its queue. */
const LOCAL = "tiny-endless-fair";
/** An upstream model with one connection to its endpoint. */
const UPSTREAM = "acme/fair";

let server: TestServer;
let upstream: MockUpstream;
/** The user messages of the requests that reached the upstream, in order. */
const arrivals: string[] = [];
/** Lets the upstream answer the request with that message. */
const answers = new Map<string, () => void>();
let keyA: string;
let keyB: string;
let accountA: string;

beforeAll(async () => {
  upstream = await startMockUpstream(async (request, response) => {
    const content = (request.body.messages as { content: string }[])[0]!.content;
    arrivals.push(content);
    await new Promise<void>((resolve) => answers.set(content, resolve));
    await writeEvents(response, textEvents(["ok"]));
  });
  const local = createTinyModelEntry(await getTestModelPath({ endless: true, size: "small" }), {
    parallel: 2,
    maxQueue: 2,
    contextLength: 2048,
  });
  const remote = createUpstreamModelEntry(UPSTREAM, upstream.baseUrl);
  server = await startTestServer({
    extraModels: [
      { ...local, id: LOCAL },
      { ...remote, engine: { ...remote.engine, maxConnections: 1 } } as CatalogModel,
    ],
  });
  ({ key: keyA, accountId: accountA } = await server.createFundedKey("fair-a", "10"));
  keyB = (await server.createFundedKey("fair-b", "10")).key;
});

afterAll(async () => {
  for (const answer of answers.values()) answer();
  await server?.close();
  await upstream?.close();
});

function chat(key: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    ...(signal === undefined ? {} : { signal }),
  });
}

/** Waits until `check` holds, polling; a guard against a hang ends the test otherwise. */
/** Holds one of the local model's sequences with a stream of `key`'s, read to its first content. */
async function holdSequence(key: string): Promise<AbortController> {
  const controller = new AbortController();
  const response = await chat(
    key,
    {
      model: LOCAL,
      messages: [{ role: "user", content: "Go on." }],
      stream: true,
      temperature: 0,
      max_tokens: 600,
    },
    controller.signal,
  );
  expect(response.status).toBe(200);
  await readUntilContent(response);
  return controller;
}

describe("a local model's queue, shared by two accounts", () => {
  it("makes room for another account's request and serves it first when a sequence frees", async () => {
    const holders = [await holdSequence(keyA), await holdSequence(keyA)];
    const finished: string[] = [];
    const local = (key: string, name: string) =>
      chat(key, { model: LOCAL, messages: [{ role: "user", content: name }], max_tokens: 2 }).then(
        (response) => {
          finished.push(name);
          return response;
        },
      );
    try {
      const a3 = local(keyA, "a3");
      const a4 = local(keyA, "a4");
      await untilModelWaiting(server, LOCAL, 2);
      // The queue is full, of account A's requests only: B's takes the place of A's latest.
      const b1 = local(keyB, "b1");
      expect(await readError(await a4)).toEqual({
        status: 503,
        error: {
          message: `The model '${LOCAL}' is busy with other requests and its queue is full (2 running, 2 waiting), and the place this request held went to another account's. Please retry shortly.`,
          type: "server_error",
          code: "model_overloaded",
          param: null,
        },
      });
      // Its usage row costs nothing, and tells how long it waited.
      const [refusedRow, ...others] = (await server.store.listUsage({ accountId: accountA })).filter(
        (row) => row.errorCode === "model_overloaded",
      );
      expect(others).toEqual([]);
      expect(refusedRow).toMatchObject({ costNano: 0n, completionTokens: 0 });
      expect(refusedRow?.queueMs).toBeGreaterThanOrEqual(0);
      // A runs two sequences and B none: the one freed goes to B, though A's waited longer.
      holders[0]!.abort();
      expect((await b1).status).toBe(200);
      expect((await a3).status).toBe(200);
      expect(finished).toEqual(["a4", "b1", "a3"]);
    } finally {
      for (const holder of holders) holder.abort();
    }
  });
});

describe("an upstream endpoint's connections, shared by two accounts", () => {
  it("gives a freed connection to the account holding none before the other's earlier requests", async () => {
    const upstreamChat = (key: string, content: string) =>
      chat(key, { model: UPSTREAM, messages: [{ role: "user", content }] });
    const a1 = upstreamChat(keyA, "a1");
    await until(() => arrivals.includes("a1"));
    const a2 = upstreamChat(keyA, "a2");
    const a3 = upstreamChat(keyA, "a3");
    await untilModelWaiting(server, UPSTREAM, 2);
    const b1 = upstreamChat(keyB, "b1");
    await untilModelWaiting(server, UPSTREAM, 3);
    // A's first request gives its connection back: B has had no turn yet, and has it next.
    for (const name of ["a1", "b1", "a2", "a3"]) {
      await until(() => answers.has(name));
      answers.get(name)!();
    }
    for (const response of await Promise.all([a1, a2, a3, b1])) expect(response.status).toBe(200);
    expect(arrivals).toEqual(["a1", "b1", "a2", "a3"]);
  });
});
