/**
 * `/ready` while the store answers reads but refuses writes (another process holds the SQLite
 * file's write lock, as a disk full or read-only would fail them): not ready while a charge waits
 * to be recorded, since requests are refused with 503 meanwhile and a balancer should route
 * elsewhere; ready again, with no request needed, once the charge's background retry went
 * through. Regression: `/ready` probed a read only and said ready throughout.
 */
import { DatabaseSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { chunk, writeEvents } from "../engine/openai/mock-upstream.ts";
import { postChat, useUpstreamOnlyServer } from "../engine/openai/use-upstream-only-server.ts";

const { server, upstream, databaseFile } = useUpstreamOnlyServer();

beforeAll(() => {
  upstream().handle(async (_request, response) => {
    await writeEvents(response, [
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hi" }),
      chunk({}, "stop"),
      { choices: [], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } },
    ]);
  });
});

let lock: DatabaseSync | undefined;
afterEach(() => {
  releaseLock();
});

function releaseLock(): void {
  if (lock === undefined) return;
  lock.exec("rollback");
  lock.close();
  lock = undefined;
}

async function readReady(): Promise<{ status: number; reasons: string[] }> {
  const response = await fetch(`${server().baseUrl.replace(/\/v1$/, "")}/ready`);
  const body = (await response.json()) as { reasons: string[] };
  return { status: response.status, reasons: body.reasons };
}

function countUsageRows(): number {
  const file = new DatabaseSync(databaseFile(), { readOnly: true });
  try {
    return Number((file.prepare("select count(*) as n from usage").get() as { n: number }).n);
  } finally {
    file.close();
  }
}

describe("/ready while the store refuses writes", () => {
  it("is 503 while a charge waits for the store, and ready again once it was recorded", async () => {
    expect(await readReady()).toEqual({ status: 200, reasons: [] });
    const rowsBefore = countUsageRows();

    lock = new DatabaseSync(databaseFile());
    lock.exec("begin immediate");
    // Streamed: the client has its answer whatever becomes of the charge.
    const response = await postChat(server(), { stream: true });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain("data: [DONE]");

    // The settle's attempts before the last byte failed; the charge now waits in the background.
    const notReady = await readReady();
    expect(notReady.status).toBe(503);
    expect(notReady.reasons).toEqual(["the store does not take writes: a charge waits to be recorded"]);

    releaseLock();
    let ready = await readReady();
    for (let attempt = 0; attempt < 100 && ready.status !== 200; attempt++) {
      await sleep(100);
      ready = await readReady();
    }
    expect(ready).toEqual({ status: 200, reasons: [] });
    expect(countUsageRows()).toBe(rowsBefore + 1);
  });
});
