import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SLOW_SETTLE_FAILURE_MS } from "../../src/billing/billing-admission-options.ts";
import { BillingAdmission } from "../../src/billing/reserve-and-settle.ts";
import type { RequestKey } from "../../src/chat/request-key.ts";
import type { AlternateBound } from "../../src/engine/engine.ts";
import { isAppError } from "../../src/errors/app-error.ts";
import { KeyLimits } from "../../src/limits/key-limits.ts";
import { MemoryRateLimiter } from "../../src/limits/memory-rate-limiter.ts";
import type { RateLimiter } from "../../src/limits/rate-limiter.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeAccount } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { until } from "../support/until.ts";
import { pricedModel as model } from "./priced-model.ts";

const directory = makeTemporaryDirectory();

describe("BillingAdmission refusing a reservation", () => {
  let store: Store;
  beforeEach(async () => {
    store = await openStore(newDatabaseUrl(directory), { owner: true });
  });
  afterEach(async () => {
    await store.close();
  });

  it("tells the available balance from the account row, never summing the account's usage", async () => {
    const account = makeAccount({ name: "short", balanceNano: 50_000n });
    await store.insertAccount(account);
    // What the account spent sums every usage row it has: a refusal must not pay for that.
    const admission = new BillingAdmission({
      store: {
        ...store,
        getAccountMoney: () => Promise.reject(new Error("a refusal summed the account's usage")),
      },
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
    });
    const key: RequestKey = {
      publicId: "keypublic001",
      accountId: account.id,
      role: "user",
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
    };
    const request = {
      requestId: "req_1",
      key,
      model,
      user: undefined,
      setHeader: () => {},
      annotate: () => {},
    };
    const held = await admission.admit({ ...request, promptTokens: 10, maxCompletionTokens: 20 });
    const refused = await admission.admit({ ...request, promptTokens: 10, maxCompletionTokens: 100 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isAppError(refused) && refused.code).toBe("insufficient_balance");
    // 50,000 less the 30,000 the first request holds.
    expect((refused as Error).message).toContain("(0.00002)");
    await held.settle({
      usage: { promptTokens: 10, completionTokens: 5 },
      finishReason: "stop",
      errorCode: undefined,
      timings: { firstPartMs: 1, totalMs: 2 },
    });
    expect(await store.getAccountMoney(account.id)).toEqual({
      balanceNano: 35_000n,
      reservedNano: 0n,
      spentNano: 15_000n,
    });
  });
});

describe("BillingAdmission giving back the tokens of a refused request", () => {
  let store: Store;
  beforeEach(async () => {
    store = await openStore(newDatabaseUrl(directory), { owner: true });
  });
  afterEach(async () => {
    await store.close();
  });

  /** A key with a tpm limit of 1000, the headers its requests get, and a fresh admission over `over`. */
  async function setUp(balanceNano: bigint, over: (store: Store) => Store = (each) => each) {
    const account = makeAccount({ name: `tpm-${balanceNano}`, balanceNano });
    await store.insertAccount(account);
    const limits = new KeyLimits(new MemoryRateLimiter());
    const admission = new BillingAdmission({ store: over(store), limits, replicaId: "test" });
    const key: RequestKey = {
      publicId: "keypublic003",
      accountId: account.id,
      role: "user",
      allowedModels: undefined,
      rpm: undefined,
      tpm: 1000,
    };
    const headers = new Map<string, string>();
    const setHeader = (name: string, value: string) => void headers.set(name, value);
    const admit = () =>
      admission
        .admit({
          requestId: "req_tpm",
          key,
          model,
          user: undefined,
          setHeader,
          annotate: () => {},
          promptTokens: 100,
          maxCompletionTokens: 200,
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
    /** What the bucket holds now, as a later response of the key would report it. */
    const remaining = async () => {
      const report = new Map<string, string>();
      await limits.report(key, (name, value) => void report.set(name, value));
      return report.get("x-ratelimit-remaining-tokens");
    };
    return { admission, key, headers, setHeader, admit, remaining };
  }

  it("on a store that cannot reserve (503): the tokens come back, and the headers say so", async () => {
    const { headers, admit, remaining } = await setUp(1_000_000n, (each) => ({
      ...each,
      reserve: () => Promise.reject(new Error("database is locked")),
    }));
    expect(String(await admit())).toContain("database is locked");
    expect(await remaining()).toBe("1000");
    expect(headers.get("x-ratelimit-remaining-tokens")).toBe("1000");
  });

  it("on a balance too low (403): the headers report the bucket full again", async () => {
    const { headers, admit, remaining } = await setUp(0n);
    const refused = await admit();
    expect(isAppError(refused) && refused.code).toBe("insufficient_balance");
    expect(await remaining()).toBe("1000");
    expect(headers.get("x-ratelimit-remaining-tokens")).toBe("1000");
  });

  it("after a token-rate check for a request refused for its length (400): the headers report the bucket full", async () => {
    const { admission, key, headers, setHeader, remaining } = await setUp(1_000_000n);
    await admission.checkTokenRate(
      { requestId: "req_long", key, model, user: undefined, setHeader, annotate: () => {} },
      300,
    );
    expect(await remaining()).toBe("1000");
    expect(headers.get("x-ratelimit-remaining-tokens")).toBe("1000");
  });
});

describe("BillingAdmission while the rate limiter cannot be reached (Redis's fail-open)", () => {
  let store: Store;
  beforeEach(async () => {
    store = await openStore(newDatabaseUrl(directory), { owner: true });
  });
  afterEach(async () => {
    await store.close();
  });

  // Regression: a request admitted while Redis was away took nothing, yet its settle gave the
  // unused part of its estimate back to the shared bucket once Redis was back: a key could go a
  // whole bucket over its limit after each outage.
  it("gives nothing back for tokens it never took", async () => {
    const account = makeAccount({ name: "fail-open", balanceNano: 1_000_000n });
    await store.insertAccount(account);
    const inner = new MemoryRateLimiter();
    let away = false;
    const limiter: RateLimiter = {
      take: (request) =>
        away
          ? Promise.resolve({
              allowed: true,
              untaken: true,
              retryAfterMs: 0,
              limit: request.limit,
              remaining: request.limit,
              resetMs: 0,
            })
          : inner.take(request),
      adjust: (request) => inner.adjust(request),
      peek: (request) => inner.peek(request),
      close: () => inner.close(),
    };
    const limits = new KeyLimits(limiter);
    const admission = new BillingAdmission({ store, limits, replicaId: "test" });
    const key: RequestKey = {
      publicId: "keypublic004",
      accountId: account.id,
      role: "user",
      allowedModels: undefined,
      rpm: undefined,
      tpm: 1000,
    };
    const request = {
      requestId: "req_open",
      key,
      model,
      user: undefined,
      setHeader: () => {},
      annotate: () => {},
    };
    // The key's other requests used 700 of its 1000.
    await inner.take({ bucket: "tokens:keypublic004", limit: 1000, amount: 700 });
    away = true;
    const admitted = await admission.admit({ ...request, promptTokens: 100, maxCompletionTokens: 200 });
    away = false;
    await admitted.settle({
      usage: { promptTokens: 10, completionTokens: 5 },
      finishReason: "stop",
      errorCode: undefined,
      timings: { firstPartMs: 1, totalMs: 2 },
    });
    const remaining = (await inner.peek({ bucket: "tokens:keypublic004", limit: 1000 })).remaining;
    // 300 left, and what refilled meanwhile (1000 a minute); not the 285 a refund would add.
    expect(remaining).toBeGreaterThanOrEqual(300);
    expect(remaining).toBeLessThan(500);
    await limiter.close();
  });
});

describe("BillingAdmission when the store fails to settle", () => {
  let store: Store;
  beforeEach(async () => {
    store = await openStore(newDatabaseUrl(directory), { owner: true });
  });
  afterEach(async () => {
    await store.close();
  });

  const key = (accountId: string): RequestKey => ({
    publicId: "keypublic002",
    accountId,
    role: "user",
    allowedModels: undefined,
    rpm: undefined,
    tpm: undefined,
  });
  const outcome = {
    usage: { promptTokens: 10, completionTokens: 5 },
    finishReason: "stop" as const,
    errorCode: undefined,
    timings: { firstPartMs: 1, totalMs: 2 },
  };

  /** Admits a request of 10 prompt tokens and at most 20 completion tokens: 30,000 held. */
  const admitOne = (admission: BillingAdmission, requestId: string, accountId: string) =>
    admission.admit({
      requestId,
      key: key(accountId),
      model,
      user: undefined,
      setHeader: () => {},
      annotate: () => {},
      promptTokens: 10,
      maxCompletionTokens: 20,
    });

  /**
   * The store, with `settle` failing its first `failures` calls (for ever with Infinity), and a
   * clock that moves a second on with each of those calls.
   */
  function failingStore(failures: number) {
    let calls = 0;
    return {
      ...store,
      settle: (usage: Parameters<Store["settle"]>[0]) => {
        calls += 1;
        return calls <= failures ? Promise.reject(new Error("the database went away")) : store.settle(usage);
      },
      now: () => Date.parse("2026-11-26T00:00:00Z") + calls * 1000,
    };
  }

  it("keeps trying in the background and charges once the store is back, the reservation holding the money meanwhile", async () => {
    const account = makeAccount({ name: "flaky", balanceNano: 50_000n });
    await store.insertAccount(account);
    const errors: { requestId: string; retrying: boolean }[] = [];
    const recovered: { attempts: number; model: string; chargedNano: bigint }[] = [];
    const flaky = failingStore(5);
    const admission = new BillingAdmission({
      // Three tries before the answer, then two in the background fail; the third goes through.
      store: flaky,
      now: flaky.now,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [1, 1], background: [20, 20] },
      onSettleError: (_error, requestId, { retrying }) => errors.push({ requestId, retrying }),
      onSettleRecovered: (_requestId, attempts, charge) => recovered.push({ attempts, ...charge }),
    });
    const ticket = await admitOne(admission, "req_flaky", account.id);
    await ticket.settle(outcome);
    expect(errors).toEqual([{ requestId: "req_flaky", retrying: true }]);
    expect(admission.pendingSettlements).toBe(1);
    expect((await store.getAccountMoney(account.id))?.reservedNano).toBe(30_000n);

    await until(() => admission.pendingSettlements === 0 && recovered.length === 1);
    // With its charge: the request was recorded without it.
    expect(recovered).toEqual([{ attempts: 3, model: "priced", chargedNano: 15_000n }]);
    expect(await store.getAccountMoney(account.id)).toEqual({
      balanceNano: 35_000n,
      reservedNano: 0n,
      spentNano: 15_000n,
    });
    const [row] = await store.listUsage({ accountId: account.id });
    expect(row).toMatchObject({ requestId: "req_flaky", costNano: 15_000n, completionTokens: 5 });
    // Stamped when it was written (the sixth try), not when the request ended: a client polling
    // the usage listing from a cursor sees it after the rows written before it.
    expect(row?.createdAt).toEqual(new Date("2026-11-26T00:00:05Z"));
  });

  it("tries the charges waiting for the store at once when another charge goes through, not after their pause (regression: /ready said for up to 30 s that the store takes no writes)", async () => {
    const account = makeAccount({ name: "back", balanceNano: 100_000n });
    await store.insertAccount(account);
    const recovered: string[] = [];
    const admission = new BillingAdmission({
      store: failingStore(1),
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [], background: [60_000] },
      onSettleRecovered: (requestId) => recovered.push(requestId),
    });
    const waiting = await admitOne(admission, "req_waiting", account.id);
    const next = await admitOne(admission, "req_next", account.id);
    await waiting.settle(outcome);
    expect(admission.pendingSettlements).toBe(1);
    // The store is back: this charge goes through, and the waiting one follows it at once.
    await next.settle(outcome);
    await until(() => recovered.length === 1, "the waiting charge is recorded", 20_000);
    expect(recovered).toEqual(["req_waiting"]);
    expect(admission.pendingSettlements).toBe(0);
    expect((await store.getAccountMoney(account.id))?.reservedNano).toBe(0n);
    await admission.close();
  });

  it("tries the first waiting charge when probed (/ready), and the others at once once it goes through", async () => {
    const account = makeAccount({ name: "probed", balanceNano: 100_000n });
    await store.insertAccount(account);
    const recovered: string[] = [];
    const admission = new BillingAdmission({
      store: failingStore(2),
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [], background: [60_000] },
      onSettleRecovered: (requestId) => recovered.push(requestId),
    });
    const first = await admitOne(admission, "req_first", account.id);
    const second = await admitOne(admission, "req_second", account.id);
    await first.settle(outcome);
    await second.settle(outcome);
    expect(admission.pendingSettlements).toBe(2);
    admission.probePendingSettlements();
    await until(() => recovered.length === 2, "both waiting charges are recorded", 20_000);
    expect(recovered).toEqual(["req_first", "req_second"]);
    expect((await store.getAccountMoney(account.id))?.reservedNano).toBe(0n);
    await admission.close();
  });

  /**
   * Admits a request of 10 prompt tokens and 990 completion tokens (1 per million each way) that a
   * fallback ten times dearer may serve, as `bound` says it can; answers the reserved nano-units.
   */
  async function reserveWithFallback(name: string, bound: AlternateBound): Promise<bigint> {
    const account = makeAccount({ name, balanceNano: 1_000_000n });
    await store.insertAccount(account);
    const admission = new BillingAdmission({
      store,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
    });
    const fallback = { ...model, id: "fallback" };
    fallback.pricing = { kind: "chat", inputPerMillion: "10.00", outputPerMillion: "10.00" };
    const ticket = await admission.admit({
      requestId: `req_${name}`,
      key: key(account.id),
      model,
      user: undefined,
      setHeader: () => {},
      annotate: () => {},
      promptTokens: 10,
      maxCompletionTokens: 990,
      alternateModels: [fallback],
      alternateBounds: new Map([["fallback", bound]]),
    });
    const reserved = (await store.getAccountMoney(account.id))?.reservedNano;
    await ticket.settle(outcome);
    return reserved ?? -1n;
  }

  it("prices a fallback at the prompt and completion its bound gives (regression: the primary's room, a wrongful 403)", async () => {
    // A local fallback with a context of 100: its own 11 prompt tokens leave it 89. Its share, 11 +
    // 89 tokens at 10,000 nano-units each, is as much as the primary's 10 + 990 at 1,000; priced at
    // 990 completion tokens it was 10,010,000, above the balance.
    expect(
      await reserveWithFallback("fallback", { refuses: false, promptTokens: 11, completionTokens: 89 }),
    ).toBe(1_000_000n);
  });

  it("prices nothing for a fallback that would refuse the request (regression: its room, a wrongful 403)", async () => {
    // The primary's 10 + 990 tokens at 1,000 nano-units each; the fallback's would be ten times that.
    expect(await reserveWithFallback("fallback-refuses", { refuses: true })).toBe(1_000_000n);
  });

  it("knows its live reservations: those of requests running or waiting for their settlement", async () => {
    const account = makeAccount({ name: "live", balanceNano: 100_000n });
    await store.insertAccount(account);
    const flaky = failingStore(1);
    const recovered: string[] = [];
    const admission = new BillingAdmission({
      store: flaky,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [], background: [20] },
      onSettleRecovered: (requestId) => recovered.push(requestId),
    });
    const running = await admitOne(admission, "req_running", account.id);
    const failing = await admitOne(admission, "req_failing", account.id);
    const reservations = await store.listReservations();
    expect(new Set(admission.liveReservationIds)).toEqual(new Set(reservations.map((each) => each.id)));
    // The first settle fails: its reservation stays live while the background retry waits.
    await failing.settle(outcome);
    expect(admission.liveReservationIds).toHaveLength(2);
    // Recovered: the background settlement went through (it leaves the pending list when it starts).
    await until(() => recovered.length === 1);
    expect(admission.liveReservationIds).toHaveLength(1);
    await running.settle(outcome);
    expect(admission.liveReservationIds).toEqual([]);
  });

  it("answers after one attempt that failed slowly (a timeout), and charges in the background", async () => {
    const account = makeAccount({ name: "slow", balanceNano: 50_000n });
    await store.insertAccount(account);
    let calls = 0;
    let recoveredSlow = false;
    const slow: Store = {
      ...store,
      settle: (usage: Parameters<Store["settle"]>[0]) => {
        calls += 1;
        if (calls > 1) return store.settle(usage);
        return new Promise((_resolve, reject) =>
          setTimeout(() => reject(new Error("Query read timeout")), SLOW_SETTLE_FAILURE_MS + 50),
        );
      },
    };
    const admission = new BillingAdmission({
      store: slow,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [1, 1], background: [20] },
      onSettleRecovered: () => {
        recoveredSlow = true;
      },
    });
    const ticket = await admitOne(admission, "req_slow", account.id);
    await ticket.settle(outcome);
    // Not tried again before the answer: a store that times out would hold the client a timeout each time.
    expect(calls).toBe(1);
    expect(admission.pendingSettlements).toBe(1);
    await until(() => recoveredSlow);
    expect(calls).toBe(2);
    expect((await store.getAccountMoney(account.id))?.spentNano).toBe(15_000n);
  });

  it("reports the charge of a settle whose answer was lost, as its retry finds it", async () => {
    const account = makeAccount({ name: "lost", balanceNano: 50_000n });
    await store.insertAccount(account);
    let calls = 0;
    const losing: Store = {
      ...store,
      // The first settle commits, and its answer never arrives (a connection dropped after the commit).
      settle: async (usage: Parameters<Store["settle"]>[0]) => {
        calls += 1;
        const charged = await store.settle(usage);
        if (calls === 1) throw new Error("Connection terminated unexpectedly");
        return charged;
      },
    };
    const admission = new BillingAdmission({
      store: losing,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [1], background: [20] },
    });
    const annotations: Record<string, unknown> = {};
    const ticket = await admission.admit({
      requestId: "req_lost",
      key: key(account.id),
      model,
      user: undefined,
      setHeader: () => {},
      annotate: (fields) => Object.assign(annotations, fields),
      promptTokens: 10,
      maxCompletionTokens: 20,
    });
    await ticket.settle(outcome);
    expect(calls).toBe(2);
    // The log line's cost (and the cost metric) is what the account paid, once.
    expect(annotations.cost).toBe("0.000015");
    expect((await store.getAccountMoney(account.id))?.spentNano).toBe(15_000n);
  });

  it("tries once more at close and reports what it gives up with the usage to record", async () => {
    const account = makeAccount({ name: "down", balanceNano: 50_000n });
    await store.insertAccount(account);
    const errors: { retrying: boolean; costNano: bigint }[] = [];
    const admission = new BillingAdmission({
      store: failingStore(Number.POSITIVE_INFINITY),
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [], background: [60_000] },
      onSettleError: (_error, _requestId, { retrying, usage }) =>
        errors.push({ retrying, costNano: usage.costNano }),
    });
    const ticket = await admitOne(admission, "req_down", account.id);
    await ticket.settle(outcome);
    await admission.close();
    expect(errors).toEqual([
      { retrying: true, costNano: 15_000n },
      { retrying: false, costNano: 15_000n },
    ]);
    expect(admission.pendingSettlements).toBe(0);
  });

  it("waits at close for settlements under way, and reports one that fails then as given up", async () => {
    const account = makeAccount({ name: "hung", balanceNano: 50_000n });
    await store.insertAccount(account);
    const errors: { requestId: string; retrying: boolean; costNano: bigint }[] = [];
    const failures: ((error: Error) => void)[] = [];
    const hung: Store = {
      ...store,
      // Each settle hangs until the test fails it (a store that stopped answering, then timed out).
      settle: () => new Promise<bigint>((_resolve, reject) => failures.push(reject)),
    };
    const admission = new BillingAdmission({
      store: hung,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [], background: [1] },
      onSettleError: (_error, requestId, { retrying, usage }) =>
        errors.push({ requestId, retrying, costNano: usage.costNano }),
    });
    const ticket = await admitOne(admission, "req_hung", account.id);
    const settling = ticket.settle(outcome);
    await until(() => failures.length === 1);
    let closed = false;
    const closing = admission.close().then(() => {
      closed = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closed).toBe(false);
    failures[0]?.(new Error("Query read timeout"));
    await Promise.all([settling, closing]);
    // Given up with its usage (to record by hand), not handed to a retry the exit would drop.
    expect(errors).toEqual([{ requestId: "req_hung", retrying: false, costNano: 15_000n }]);
    expect(admission.pendingSettlements).toBe(0);
    expect(admission.liveReservationIds).toEqual([]);
  });

  it("waits at close for a background attempt under way", async () => {
    const account = makeAccount({ name: "retried", balanceNano: 50_000n });
    await store.insertAccount(account);
    const errors: boolean[] = [];
    let calls = 0;
    const failures: ((error: Error) => void)[] = [];
    const flaky: Store = {
      ...store,
      // The first settle fails at once; the background one hangs until the test fails it.
      settle: () => {
        calls += 1;
        if (calls === 1) return Promise.reject(new Error("the database went away"));
        return new Promise<bigint>((_resolve, reject) => failures.push(reject));
      },
    };
    const admission = new BillingAdmission({
      store: flaky,
      limits: new KeyLimits(new MemoryRateLimiter()),
      replicaId: "test",
      settleRetryDelaysMs: { beforeAnswer: [], background: [1] },
      onSettleError: (_error, _requestId, { retrying }) => errors.push(retrying),
    });
    const ticket = await admitOne(admission, "req_retried", account.id);
    await ticket.settle(outcome);
    await until(() => failures.length === 1);
    // The attempt under way has left the pending list: close must still wait for it.
    expect(admission.pendingSettlements).toBe(0);
    const closing = admission.close();
    failures[0]?.(new Error("Query read timeout"));
    await closing;
    expect(errors).toEqual([true, false]);
    expect(admission.pendingSettlements).toBe(0);
  });
});
