import { describe, expect, it } from "vitest";
import { createLeasePool } from "../../../src/engine/llama/create-lease-pool.ts";
import { isAppError } from "../../../src/errors/app-error.ts";

describe("createLeasePool", () => {
  it("lends free items at once and hands a returned item to the first waiter", async () => {
    const pool = createLeasePool({ items: ["a"], maxQueue: 2 });
    const first = await pool.acquire(new AbortController().signal);
    expect(first?.item).toBe("a");
    const order: string[] = [];
    const second = pool.acquire(new AbortController().signal).then((lease) => {
      order.push("second");
      return lease;
    });
    const third = pool.acquire(new AbortController().signal).then((lease) => {
      order.push("third");
      return lease;
    });
    expect(pool.waiting).toBe(2);
    first?.release();
    (await second)?.release();
    (await third)?.release();
    expect(order).toEqual(["second", "third"]);
    expect(pool.leased).toBe(0);
  });

  it("refuses with model_overloaded once maxQueue requests wait", async () => {
    const pool = createLeasePool({ items: [1], maxQueue: 1, modelId: "acme/tiny" });
    await pool.acquire(new AbortController().signal);
    void pool.acquire(new AbortController().signal);
    const refused = await pool.acquire(new AbortController().signal).catch((error: unknown) => error);
    expect(isAppError(refused) && refused.code).toBe("model_overloaded");
    expect(isAppError(refused) && refused.retryAfterSeconds).toBe(1);
    // Which model, and how full: a client with several models knows which one to spread away from.
    expect((refused as Error).message).toBe(
      "The model 'acme/tiny' is busy with other requests and its queue is full (1 running, 1 waiting). Please retry shortly.",
    );
  });

  it("takes a waiter whose signal aborts out of the queue", async () => {
    const pool = createLeasePool({ items: [1], maxQueue: 1 });
    const held = await pool.acquire(new AbortController().signal);
    const controller = new AbortController();
    const waiting = pool.acquire(controller.signal);
    controller.abort();
    expect(await waiting).toBeUndefined();
    expect(pool.waiting).toBe(0);
    // The freed place in the queue can be taken again, and the item goes to the new waiter.
    const next = pool.acquire(new AbortController().signal);
    held?.release();
    expect((await next)?.item).toBe(1);
  });

  it("ignores a second release of the same lease", async () => {
    const pool = createLeasePool({ items: ["x"], maxQueue: 0 });
    const lease = await pool.acquire(new AbortController().signal);
    lease?.release();
    lease?.release();
    expect(pool.leased).toBe(0);
    const again = await pool.acquire(new AbortController().signal);
    expect(again?.item).toBe("x");
    expect(await pool.acquire(new AbortController().signal).catch(() => "refused")).toBe("refused");
  });

  it("wakes waiters with undefined on close", async () => {
    const pool = createLeasePool({ items: [1], maxQueue: 1 });
    await pool.acquire(new AbortController().signal);
    const waiting = pool.acquire(new AbortController().signal);
    pool.close();
    expect(await waiting).toBeUndefined();
    expect(await pool.acquire(new AbortController().signal)).toBeUndefined();
  });

  it("offers its waiters, in order, to leave once retired, and lends a freed item to one still there", async () => {
    const pool = createLeasePool({ items: ["a"], maxQueue: 3 });
    const held = await pool.acquire(new AbortController().signal);
    const offered: string[] = [];
    const leaves = new Map<string, () => boolean>();
    const decided = new Map<string, PromiseWithResolvers<void>>();
    const wait = (name: string) =>
      pool.acquire(new AbortController().signal, {
        onRetired: (leave) => {
          offered.push(name);
          leaves.set(name, leave);
          const decision = Promise.withResolvers<void>();
          decided.set(name, decision);
          return decision.promise;
        },
      });
    const first = wait("first");
    const second = wait("second");
    const plain = pool.acquire(new AbortController().signal);
    expect(offered).toEqual([]);
    pool.retire();
    expect(offered).toEqual(["first", "second"]);
    // Being moved, they count where they move to; the plain waiter counts here.
    expect(pool.waiting).toBe(1);

    expect(leaves.get("first")?.()).toBe(true);
    expect(await first).toBeUndefined();
    // The second's move is not decided when the item comes back: the item is its.
    held?.release();
    expect((await second)?.item).toBe("a");
    expect(leaves.get("second")?.()).toBe(false);
    decided.get("second")?.resolve();
    decided.get("first")?.resolve();
    await Promise.resolve();
    expect(pool.waiting).toBe(1);

    // One that comes to wait on the retired pool is offered at once.
    const late = wait("late");
    expect(offered).toEqual(["first", "second", "late"]);
    expect(leaves.get("late")?.()).toBe(true);
    expect(await late).toBeUndefined();
    expect(pool.waiting).toBe(1);
    pool.close();
    expect(await plain).toBeUndefined();
  });

  it("puts a request moved from another queue ahead of those that came later, past maxQueue", async () => {
    const pool = createLeasePool({ items: [1], maxQueue: 1 });
    const held = await pool.acquire(new AbortController().signal);
    const order: string[] = [];
    const wait = (name: string, since?: number) =>
      pool
        .acquire(new AbortController().signal, since === undefined ? undefined : { since })
        .then((lease) => {
          order.push(name);
          lease?.release();
        });
    const later = wait("arrived after the reload");
    const movedSecond = wait("moved, queued second", 20);
    const movedFirst = wait("moved, queued first", 10);
    expect(pool.waiting).toBe(3);
    // The refusal tells the counts as they are (regression: the queue's room, "1 waiting").
    expect(await pool.acquire(new AbortController().signal).catch((error: Error) => error.message)).toBe(
      "The model is busy with other requests and its queue is full (1 running, 3 waiting). Please retry shortly.",
    );
    held?.release();
    await Promise.all([later, movedSecond, movedFirst]);
    expect(order).toEqual(["moved, queued first", "moved, queued second", "arrived after the reload"]);
  });

  it("hands a freed item to the tenant running the fewest, in arrival order within a tenant", async () => {
    const pool = createLeasePool({ items: ["x", "y"], maxQueue: 8 });
    const heldByA = await pool.acquire(new AbortController().signal, { tenant: "a" });
    const heldByB = await pool.acquire(new AbortController().signal, { tenant: "b" });
    const order: string[] = [];
    const wait = (name: string, tenant: string) =>
      pool.acquire(new AbortController().signal, { tenant }).then((lease) => {
        order.push(name);
        return lease;
      });
    const a2 = wait("a2", "a");
    const a3 = wait("a3", "a");
    const b2 = wait("b2", "b");
    heldByA?.release();
    await a2;
    // a runs one again, b's holder leaves: b runs none, and its request goes before a's third,
    // which came first.
    heldByB?.release();
    await b2;
    (await a2)?.release();
    await a3;
    expect(order).toEqual(["a2", "b2", "a3"]);
    expect(pool.waiting).toBe(0);
    (await b2)?.release();
    (await a3)?.release();
    expect(pool.leased).toBe(0);
  });

  it("makes room in a full queue for another tenant by refusing the latest request of the tenant waiting with the most", async () => {
    const pool = createLeasePool({ items: [1], maxQueue: 2, modelId: "tiny" });
    const held = await pool.acquire(new AbortController().signal, { tenant: "a" });
    const a2 = pool.acquire(new AbortController().signal, { tenant: "a" });
    const a3 = pool.acquire(new AbortController().signal, { tenant: "a" }).catch((error: unknown) => error);
    const b1 = pool.acquire(new AbortController().signal, { tenant: "b" });
    const refused = await a3;
    expect(isAppError(refused) && refused.code).toBe("model_overloaded");
    expect(isAppError(refused) && refused.retryAfterSeconds).toBe(1);
    expect((refused as Error).message).toBe(
      "The model 'tiny' is busy with other requests and its queue is full (1 running, 2 waiting), and the place this request held went to another account's. Please retry shortly.",
    );
    expect(pool.waiting).toBe(2);
    // a and b wait with one each now: neither gives way to the other's next request.
    const a4 = await pool.acquire(new AbortController().signal, { tenant: "a" }).catch(() => "refused");
    const b2 = await pool.acquire(new AbortController().signal, { tenant: "b" }).catch(() => "refused");
    expect([a4, b2]).toEqual(["refused", "refused"]);
    // Both run none once the item is back, and a had the last turn: b's request goes first.
    held?.release();
    expect((await b1)?.item).toBe(1);
    (await b1)?.release();
    expect((await a2)?.item).toBe(1);
  });
});
