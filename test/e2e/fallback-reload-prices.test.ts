/**
 * A request whose fallback serves it after a reload changed that fallback: it is charged at the
 * prices it was admitted with (those its reservation was priced at) and answered and recorded
 * under the fallback's id. The fallback's entry used to be looked up in the catalogue once it had
 * served, after the reload: a SIGHUP that raised its price 50-fold while the primary was failing
 * charged 50 times the reservation, and one that removed it charged and recorded the request as
 * the primary model. A reload that removed the fallback before the primary failed made the request
 * fail with 503: it is served by the fallback it was admitted with, whose engine it holds.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { CatalogModel, Config } from "../../src/catalog/catalog.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { createTestConfig } from "../support/test-server.ts";

/** The model the request names, at 2.00 per million; its upstream answers 500 once the test lets it. */
const PRIMARY = "broken";
/** Its fallback, at 1.00 per million tokens in and out when the request is admitted. */
const FALLBACK = "backup";
/** What the fallback's upstream counts: 10 prompt and 4 completion tokens. */
const USAGE: [number, number] = [10, 4];
/** The fallback's usage at the admitted prices: 1,000 nano-units a token. */
const ADMITTED_COST = 14n * 1_000n;

/** An upstream request the test holds until it lets it go. */
interface Hold {
  arrived: PromiseWithResolvers<void>;
  release: PromiseWithResolvers<void>;
}

function createHold(): Hold {
  return { arrived: Promise.withResolvers(), release: Promise.withResolvers() };
}

let folder: string;
let upstream: MockUpstream;
let server: RunningServer;
let store: Store;
let primaryCall: Hold;
let fallbackCall: Hold;
let logLines: { msg: string; fallback?: string }[];

function upstreamModel(id: string, options: { price: string; fallbacks?: string[] }): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "acme",
    pricing: { kind: "chat", inputPerMillion: options.price, outputPerMillion: options.price },
    contextLength: 8192,
    created: 1_700_000_300,
    engine: {
      type: "openai",
      endpoints: [{ baseUrl: upstream.baseUrl, apiKey: undefined }],
      model: `${id}-upstream`,
      fallbacks: options.fallbacks ?? [],
      maxRetries: 0,
    },
  };
}

function configWith(models: CatalogModel[]): Config {
  return createTestConfig({
    database: `sqlite:${join(folder, "tollgate.db")}`,
    models,
  });
}

/** The catalogue the request is admitted with: the fallback at 1.00 per million. */
function admittedModels(): CatalogModel[] {
  return [
    upstreamModel(PRIMARY, { price: "2", fallbacks: [FALLBACK] }),
    upstreamModel(FALLBACK, { price: "1" }),
  ];
}

beforeEach(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-fallback-reload-"));
  primaryCall = createHold();
  fallbackCall = createHold();
  upstream = await startMockUpstream(async (request, response) => {
    if (request.body.model === `${PRIMARY}-upstream`) {
      primaryCall.arrived.resolve();
      await primaryCall.release.promise;
      response.writeHead(500, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { message: "down" } }));
      return;
    }
    fallbackCall.arrived.resolve();
    await fallbackCall.release.promise;
    await writeEvents(response, textEvents(["Served", " by", " the", " backup"], { usage: USAGE }));
  });
  // A fresh server each time: the primary's failures cool its endpoint down.
  const config = configWith(admittedModels());
  logLines = [];
  const { destination } = collectLogLines(logLines);
  server = await startServer({ config, logger: { destination } });
  store = await openStore(config.database);
});

afterEach(async () => {
  primaryCall.release.resolve();
  fallbackCall.release.resolve();
  await server?.close();
  await store?.close();
  await upstream?.close();
  rmSync(folder, { recursive: true, force: true });
});

/** A key on a new account holding 1.00: enough to pay even the raised price. */
async function fundedKey(): Promise<{ accountId: string; client: OpenAI }> {
  const account = await createAccount(store, { name: "fallback-reload", balanceNano: 1_000_000_000n });
  const { key } = await createKey(store, { role: "user", accountId: account.id });
  return {
    accountId: account.id,
    client: new OpenAI({ baseURL: server.baseUrl, apiKey: key, maxRetries: 0 }),
  };
}

const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "Hello" }];

/**
 * Lets the held upstream calls go (the primary's 500, then the fallback's answer) and checks that
 * `answer` is the fallback's, recorded under its id and charged at the prices it was admitted with.
 */
async function expectServedByFallbackAtAdmittedPrices(
  answer: Promise<OpenAI.Chat.ChatCompletion>,
  accountId: string,
): Promise<void> {
  primaryCall.release.resolve();
  fallbackCall.release.resolve();
  const completion = await answer;
  expect(completion.model).toBe(FALLBACK);
  expect(completion.choices[0]?.message.content).toBe("Served by the backup");
  expect(await store.listUsage({ accountId })).toMatchObject([
    { model: FALLBACK, promptTokens: USAGE[0], completionTokens: USAGE[1], costNano: ADMITTED_COST },
  ]);
  expect(await store.getAccountMoney(accountId)).toEqual({
    balanceNano: 1_000_000_000n - ADMITTED_COST,
    reservedNano: 0n,
    spentNano: ADMITTED_COST,
  });
}

describe("a fallback that a reload changes while the primary fails", () => {
  it("is charged at the prices the request was admitted with", async () => {
    const { accountId, client } = await fundedKey();
    const answer = client.chat.completions.create({ model: PRIMARY, messages, max_tokens: 10 });
    await primaryCall.arrived.promise;
    // 50 times dearer, and the account could pay it.
    await server.reload(
      configWith([
        upstreamModel(PRIMARY, { price: "2", fallbacks: [FALLBACK] }),
        upstreamModel(FALLBACK, { price: "50" }),
      ]),
    );
    await expectServedByFallbackAtAdmittedPrices(answer, accountId);
  });

  it("is still the one answered, recorded and charged when the reload removed it as it began", async () => {
    const { accountId, client } = await fundedKey();
    // Its headers wait for the first part, which waits for the test: not awaited yet.
    const answer = client.chat.completions.create({
      model: PRIMARY,
      messages,
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    });
    await primaryCall.arrived.promise;
    primaryCall.release.resolve();
    // The fallback has been asked; the reload takes it out of the catalogue before it answers.
    await fallbackCall.arrived.promise;
    await server.reload(configWith([upstreamModel(PRIMARY, { price: "2" })]));
    fallbackCall.release.resolve();

    const stream = await answer;
    const models = new Set<string>();
    let text = "";
    for await (const event of stream) {
      models.add(event.model);
      text += event.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe("Served by the backup");
    expect([...models]).toEqual([FALLBACK]);
    expect(await store.listUsage({ accountId })).toMatchObject([
      { model: FALLBACK, promptTokens: USAGE[0], completionTokens: USAGE[1], costNano: ADMITTED_COST },
    ]);
  });

  it("still serves it when the reload removed it before the primary failed (regression: 503)", async () => {
    const { accountId, client } = await fundedKey();
    const answer = client.chat.completions.create({ model: PRIMARY, messages, max_tokens: 10 });
    await primaryCall.arrived.promise;
    // The request was admitted with the fallback: it keeps it, as it keeps its primary's engine.
    await server.reload(configWith([upstreamModel(PRIMARY, { price: "2", fallbacks: [] })]));
    await expectServedByFallbackAtAdmittedPrices(answer, accountId);
    // New requests follow the new catalogue: the fallback is gone for them.
    primaryCall = createHold();
    primaryCall.release.resolve();
    await expect(
      client.chat.completions.create({ model: FALLBACK, messages, max_tokens: 10 }),
    ).rejects.toMatchObject({ status: 404 });
  });
});
