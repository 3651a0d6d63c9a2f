import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { getTestModelPath } from "../support/test-model.ts";
import { createTinyModelEntry, untilModelWaiting } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

/** An endless model that runs one request and queues one more. */
const QUEUED_MODEL = "endless-queued";
const TPM = 5_000;
/** A prompt of some hundreds of tokens: the token rate it takes shows against {@link TPM}. */
const messages = [{ role: "user", content: "word ".repeat(400) }];

const server = useTestServer(async () => {
  const path = await getTestModelPath({ endless: true, size: "small" });
  return {
    extraModels: [
      { ...createTinyModelEntry(path, { parallel: 1, maxQueue: 1, contextLength: 2048 }), id: QUEUED_MODEL },
    ],
  };
});

function chat(key: string, body: Record<string, unknown>, signal?: AbortSignal) {
  return fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: QUEUED_MODEL, messages, ...body }),
    ...(signal === undefined ? {} : { signal }),
  });
}

/** Holds the model's one sequence with a stream of the starter key until aborted. */
async function holdSequence(): Promise<AbortController> {
  const controller = new AbortController();
  const response = await chat(server().starterKey, { stream: true, temperature: 1 }, controller.signal);
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  await reader.read();
  return controller;
}

/** Waits until the model has `count` requests waiting for its sequence. */
const untilWaiting = (count: number) => untilModelWaiting(server(), QUEUED_MODEL, count);

/** Sends a one-token request that runs, and reads the tokens its key has left and what it used. */
async function remainingAfterOneRun(key: string): Promise<{ remaining: number; used: number }> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const response = await chat(key, { max_tokens: 1 });
    if (response.status === 503) {
      await response.arrayBuffer();
      await sleep(50);
      continue;
    }
    expect(response.status).toBe(200);
    const body = (await response.json()) as { usage: { total_tokens: number } };
    return {
      remaining: Number(response.headers.get("x-ratelimit-remaining-tokens")),
      used: body.usage.total_tokens,
    };
  }
  throw new Error("the model never freed its sequence");
}

describe("a request the model never began on uses none of its key's token rate", () => {
  it("when it is refused with 503 model_overloaded (regression: each refusal took its prompt's tokens)", async () => {
    // On the account that holds the sequence and the queue: another account's request would take
    // the queue's place instead of being refused (fair-queue.ts).
    const limited = { key: await server().createKey({ tpm: TPM }) };
    const holder = await holdSequence();
    const queued = new AbortController();
    const waiting = chat(server().starterKey, { max_tokens: 1 }, queued.signal).catch(() => undefined);
    await untilWaiting(1);
    for (let refusal = 0; refusal < 3; refusal++) {
      const refused = await chat(limited.key, { max_tokens: 1 });
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("model_overloaded");
    }
    queued.abort();
    holder.abort();
    await waiting;
    const { remaining, used } = await remainingAfterOneRun(limited.key);
    // Only the request that ran took tokens (the bucket refills meanwhile, so at least this).
    expect(remaining).toBeGreaterThanOrEqual(TPM - used);
  });

  it("when its client leaves while it waits for its turn, which the ledger records as client_closed", async () => {
    const limited = await server().createFundedKey("queued-tpm", "1", { tpm: TPM });
    const holder = await holdSequence();
    for (let leaver = 0; leaver < 3; leaver++) {
      const controller = new AbortController();
      const pending = chat(limited.key, { max_tokens: 1 }, controller.signal).catch(() => undefined);
      await untilWaiting(1);
      controller.abort();
      await pending;
      await untilWaiting(0);
    }
    holder.abort();
    const { remaining, used } = await remainingAfterOneRun(limited.key);
    expect(remaining).toBeGreaterThanOrEqual(TPM - used);
    const rows = await server().store.listUsage({ accountId: limited.accountId });
    expect(rows.filter((row) => row.errorCode === "client_closed")).toHaveLength(3);
    expect(rows.every((row) => row.costNano === 0n || row.errorCode === undefined)).toBe(true);
  });
});
