import { describe, expect, it } from "vitest";
import { FairQueue } from "../../src/engine/fair-queue.ts";

/** Takes every waiting item, one turn at a time, each then counted as running for its tenant. */
function drain(queue: FairQueue<string>): string[] {
  const order: string[] = [];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    queue.started(next.tenant);
    order.push(next.item);
  }
  return order;
}

describe("FairQueue", () => {
  it("keeps arrival order within one tenant", () => {
    const queue = new FairQueue<string>();
    for (const item of ["a1", "a2", "a3"]) queue.push("a", item);
    expect(queue.size).toBe(3);
    expect(drain(queue)).toEqual(["a1", "a2", "a3"]);
    expect(queue.size).toBe(0);
  });

  it("gives the next turn to the tenant running the fewest, then to the longest waiting", () => {
    const queue = new FairQueue<string>();
    queue.started("a");
    queue.started("a");
    for (const item of ["a1", "a2", "a3"]) queue.push("a", item);
    queue.push("b", "b1");
    queue.push("b", "b2");
    queue.push("c", "c1");
    // b and c run nothing, a runs two: b's first arrived before c's.
    expect(queue.shift()).toEqual({ tenant: "b", item: "b1" });
    queue.started("b");
    expect(queue.shift()).toEqual({ tenant: "c", item: "c1" });
    queue.started("c");
    // b and c run one each, a two: b, whose first request came first; then only a waits.
    expect(queue.shift()).toEqual({ tenant: "b", item: "b2" });
    queue.started("b");
    expect(drain(queue)).toEqual(["a1", "a2", "a3"]);
  });

  it("counts what a tenant runs down again when it finishes", () => {
    const queue = new FairQueue<string>();
    queue.started("a");
    queue.started("b");
    queue.push("b", "b1");
    queue.push("a", "a1");
    queue.finished("a");
    // a runs nothing now, b one: a's request goes first although b's came first.
    expect(queue.shift()?.item).toBe("a1");
    queue.finished("b");
    expect(queue.shift()?.item).toBe("b1");
  });

  it("takes turns between tenants running as many, the one whose last turn is longest ago first", () => {
    const queue = new FairQueue<string>();
    queue.started("a");
    queue.push("a", "a2");
    queue.push("a", "a3");
    queue.push("b", "b1");
    // One connection: a's first request gives it back, and b has had no turn yet.
    queue.finished("a");
    expect(queue.shift()?.item).toBe("b1");
    queue.started("b");
    queue.finished("b");
    expect(queue.shift()?.item).toBe("a2");
    queue.started("a");
    queue.push("b", "b2");
    queue.finished("a");
    expect(queue.shift()?.item).toBe("b2");
    queue.started("b");
    queue.finished("b");
    expect(queue.shift()?.item).toBe("a3");
  });

  it("takes a deleted item out of its line and says whether it waited", () => {
    const queue = new FairQueue<string>();
    queue.push("a", "a1");
    queue.push("a", "a2");
    expect(queue.delete("a", "a1")).toBe(true);
    expect(queue.delete("a", "a1")).toBe(false);
    expect(queue.delete("b", "a2")).toBe(false);
    expect([...queue.items()]).toEqual(["a2"]);
    expect(queue.size).toBe(1);
    expect(queue.delete("a", "a2")).toBe(true);
    expect(queue.shift()).toBeUndefined();
  });

  it("makes room for a tenant by refusing the latest arrival of the tenant waiting with the most", () => {
    const queue = new FairQueue<string>();
    for (const item of ["a1", "a2", "a3"]) queue.push("a", item);
    queue.push("b", "b1");
    expect(queue.makeRoomFor("c")).toBe("a3");
    expect([...queue.items()]).toEqual(["a1", "a2", "b1"]);
    queue.push("c", "c1");
    // a waits with 2, b and c with 1: another of b's would leave them at 2 and 1, no fairer.
    expect(queue.makeRoomFor("b")).toBeUndefined();
    expect(queue.makeRoomFor("a")).toBeUndefined();
    expect(queue.makeRoomFor("d")).toBe("a2");
    expect([...queue.items()]).toEqual(["a1", "b1", "c1"]);
  });

  it("refuses nothing for a tenant that already waits with the most, or in an empty queue", () => {
    const queue = new FairQueue<string>();
    expect(queue.makeRoomFor("a")).toBeUndefined();
    queue.push("a", "a1");
    queue.push("a", "a2");
    expect(queue.makeRoomFor("a")).toBeUndefined();
    expect(queue.size).toBe(2);
  });
});
