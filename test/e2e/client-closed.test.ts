/**
 * A request whose client leaves before the answer is complete is still charged for what was
 * generated; it must also get its log line and its metrics (as 499), and its usage row must say
 * that the client left.
 */
import { PassThrough } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_CLOSED_STATUS } from "../../src/api/build-app.ts";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import { CLIENT_CLOSED } from "../../src/chat/chat-service.ts";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createUpstreamModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

const SLOW = "slow-remote";
/** The same upstream through one connection: a second request waits in Tollgate for it. */
const ONE_LANE = "one-lane";

/** How long a poll waits for a state: a guard against a hang, not a bound the tests measure. */
const HANG_GUARD = { timeout: 20_000 };

let upstream: MockUpstream;
let server: TestServer;
const logLines: Record<string, unknown>[] = [];
/** Events the upstream has written, by the request id in the user message. */
const eventsSent = new Map<string, number>();

beforeAll(async () => {
  // Ticks every 20 ms, for far longer than any test waits.
  upstream = await startMockUpstream(async (request, response) => {
    const requestId = readRequestId(request.body);
    for (const event of textEvents(Array.from({ length: 1_000 }, () => " tick"))) {
      if (response.destroyed) return;
      await writeEvents(response, [event], { done: false, end: false });
      eventsSent.set(requestId, (eventsSent.get(requestId) ?? 0) + 1);
      await sleep(20);
    }
    response.end("data: [DONE]\n\n");
  });
  const destination = new PassThrough();
  destination.on("data", (data: Buffer) => {
    for (const line of data.toString().split("\n")) if (line.trim() !== "") logLines.push(JSON.parse(line));
  });
  server = await startTestServer({
    logDestination: destination,
    extraModels: [createUpstreamModelEntry(SLOW, upstream.baseUrl), oneLaneModel(upstream.baseUrl)],
  });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

/** The request id {@link sendAndLeave} puts in the user message. */
function readRequestId(body: Record<string, unknown>): string {
  const messages = body.messages as { content: string }[];
  return messages.at(-1)?.content.replace(/^Tick\. /, "") ?? "";
}

function oneLaneModel(baseUrl: string): CatalogModel {
  const entry = createUpstreamModelEntry(ONE_LANE, baseUrl);
  if (entry.engine?.type !== "openai") throw new Error("an upstream model");
  return { ...entry, engine: { ...entry.engine, maxConnections: 1 } };
}

/** Sends a request with `requestId` and leaves once `leave` resolves (given the response, if any came). */
async function sendAndLeave(
  requestId: string,
  stream: boolean,
  leave: (response: Response | undefined) => Promise<void>,
  model = SLOW,
): Promise<void> {
  const controller = new AbortController();
  const pending = fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${server.starterKey}`,
      "content-type": "application/json",
      "x-request-id": requestId,
    },
    body: JSON.stringify({ model, messages: [{ role: "user", content: `Tick. ${requestId}` }], stream }),
    signal: controller.signal,
  });
  if (stream) await leave(await pending);
  else {
    pending.catch(() => undefined);
    await leave(undefined);
  }
  controller.abort();
}

async function logLineOf(requestId: string): Promise<Record<string, unknown> | undefined> {
  const find = () =>
    logLines.find((candidate) => candidate.reqId === requestId && candidate.msg === "request");
  await expect.poll(find, HANG_GUARD).toBeDefined();
  return find();
}

/** The count of one series in `/metrics`, 0 when it is not there. */
async function readMetric(series: string): Promise<number> {
  const metrics = await (await fetch(`${server.origin}/metrics`)).text();
  const line = metrics.split("\n").find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

describe("a client that leaves early", () => {
  it("is logged and counted as 499 with the tokens and cost it was charged, streamed or not", async () => {
    await sendAndLeave("left-stream", true, async (response) => {
      const reader = response!.body!.getReader();
      let text = "";
      while ((text.match(/tick/g) ?? []).length < 3)
        text += new TextDecoder().decode((await reader.read()).value);
    });
    // The upstream writes an event every 20 ms, and the server reads what came in each time the
    // event loop they share turns: once the tenth is written, the first ticks have been read.
    await sendAndLeave("left-plain", false, () =>
      expect.poll(() => eventsSent.get("left-plain") ?? 0, HANG_GUARD).toBeGreaterThanOrEqual(10),
    );

    for (const [requestId, stream] of [
      ["left-stream", true],
      ["left-plain", false],
    ] as const) {
      const line = await logLineOf(requestId);
      expect(line, `the log line of ${requestId}`).toMatchObject({
        route: "/v1/chat/completions",
        status: CLIENT_CLOSED_STATUS,
        model: SLOW,
        stream,
        // As its usage row's error code says.
        error: "client_closed",
      });
      expect(line?.completionTokens).toBeGreaterThanOrEqual(3);
      expect(line?.cost).toMatch(/^0\.0000\d+$/);
    }
    expect(logLines.filter((line) => String(line.reqId).startsWith("left-"))).toHaveLength(2);

    const metrics = await (await fetch(`${server.origin}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(`tollgate_requests_total\\{route="/v1/chat/completions",model="${SLOW}",status="499"\\} 2`),
    );
    expect(metrics).toMatch(new RegExp(`tollgate_cost_total\\{model="${SLOW}"\\} 0\\.0000\\d+`));

    const rows = await server.store.listUsage({ accountId: server.starterAccountId });
    const left = rows.filter((row) => row.requestId.startsWith("left-"));
    expect(left).toHaveLength(2);
    for (const row of left) {
      expect(row.errorCode).toBe(CLIENT_CLOSED);
      // Stopped, not finished: the ledger claims no finish reason.
      expect(row.finishReason).toBeUndefined();
      expect(row.completionTokens).toBeGreaterThanOrEqual(3);
      expect(row.costNano).toBeGreaterThan(0n);
    }
  });

  it("has no time to first token when it left before anything was generated (queued for a connection)", async () => {
    let releaseFirst = () => {};
    const first = sendAndLeave(
      "lane-holder",
      true,
      () =>
        new Promise<void>((resolve) => {
          releaseFirst = resolve;
        }),
      ONE_LANE,
    );
    await expect.poll(() => eventsSent.get("lane-holder") ?? 0, HANG_GUARD).toBeGreaterThan(0);
    // Waits behind the first for the model's one upstream connection, and leaves.
    const waiting = `tollgate_model_requests{model="${ONE_LANE}",state="waiting"}`;
    await sendAndLeave(
      "left-queued",
      false,
      () => expect.poll(() => readMetric(waiting), HANG_GUARD).toBe(1),
      ONE_LANE,
    );
    const line = await logLineOf("left-queued");
    expect(line).toMatchObject({ status: CLIENT_CLOSED_STATUS, completionTokens: 0 });
    expect(line?.firstTokenMs).toBeUndefined();
    releaseFirst();
    await first;
    // Only the request that generated is in the time-to-first-token histogram.
    await logLineOf("lane-holder");
    const metrics = await (await fetch(`${server.origin}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(`tollgate_time_to_first_token_seconds_count\\{model="${ONE_LANE}"\\} 1\\n`),
    );
  });
});
