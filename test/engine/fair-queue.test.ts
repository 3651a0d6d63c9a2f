import { describe, expect, it } from "vitest";
import { FairQueue } from "../../src/engine/fair-queue.ts";

/**
 * One resource, given to the queue's next as soon as it comes back: `turns` turns, the running
 * request's tenant finishing before each. `onFinished` runs as a request ends (a client that sends
 * its next request then). Answers the items in the order they ran.
 */
function serveOneAtATime(
  queue: FairQueue<string>,
  first: { tenant: string; item: string },
  turns: number,
  onFinished: (finished: { tenant: string; item: string }) => void = () => {},
): string[] {
  const order = [first.item];
  let running = first;
  for (let turn = 1; turn < turns; turn++) {
    queue.finished(running.tenant);
    onFinished(running);
    const next = queue.shift();
    if (next === undefined) break;
    order.push(next.item);
    running = next;
  }
  return order;
}

describe("FairQueue", () => {
  it("keeps arrival order within one tenant", () => {
    const queue = new FairQueue<string>();
    queue.start("a");
    for (const item of ["a1", "a2", "a3"]) queue.push("a", item);
    expect(queue.size).toBe(3);
    expect(serveOneAtATime(queue, { tenant: "a", item: "a0" }, 10)).toEqual(["a0", "a1", "a2", "a3"]);
    expect(queue.size).toBe(0);
  });

  it("gives the next turn to the tenant running the fewest", () => {
    const queue = new FairQueue<string>();
    queue.start("a");
    queue.start("a");
    queue.start("b");
    queue.push("a", "a1");
    queue.push("b", "b1");
    queue.push("c", "c1");
    // c runs nothing; then b runs one where a runs two.
    expect(queue.shift()?.item).toBe("c1");
    expect(queue.shift()?.item).toBe("b1");
    expect(queue.shift()?.item).toBe("a1");
    expect(queue.shift()).toBeUndefined();
  });

  it("takes turns between a backlog and a request that came after it", () => {
    const queue = new FairQueue<string>();
    queue.start("a");
    for (const item of ["a1", "a2", "a3"]) queue.push("a", item);
    queue.push("b", "b1");
    queue.push("b", "b2");
    // a had its turn with the first: b's first goes next, then they alternate.
    expect(serveOneAtATime(queue, { tenant: "a", item: "a0" }, 10)).toEqual([
      "a0",
      "b1",
      "a1",
      "b2",
      "a2",
      "a3",
    ]);
  });

  it("gives a backlog its share beside tenants that send one request at a time, each as the last ends", () => {
    const queue = new FairQueue<string>();
    queue.start("a");
    for (let index = 1; index < 20; index++) queue.push("a", `a${index}`);
    const sent = { b: 0, c: 0 };
    queue.push("b", "b0");
    queue.push("c", "c0");
    const order = serveOneAtATime(queue, { tenant: "a", item: "a0" }, 30, (finished) => {
      if (finished.tenant === "a") return;
      const tenant = finished.tenant as "b" | "c";
      sent[tenant]++;
      queue.push(tenant, `${tenant}${sent[tenant]}`);
    });
    // Forgotten as soon as it neither waited nor ran, a tenant that sent again at once counted as
    // new, went first each time, and the backlog had one turn in 26.
    expect(order.filter((item) => item.startsWith("a"))).toHaveLength(10);
    expect(order.slice(0, 9)).toEqual(["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]);
  });

  it("lets a tenant that comes back after the queue moved on start at the current turn", () => {
    const queue = new FairQueue<string>();
    queue.start("a");
    for (const item of ["a1", "a2", "a3", "a4"]) queue.push("a", item);
    queue.push("b", "b1");
    const order = serveOneAtATime(queue, { tenant: "a", item: "a0" }, 4);
    expect(order).toEqual(["a0", "b1", "a1", "a2"]);
    // b, gone meanwhile, is not owed the turns it missed: it takes the next, then a's come again.
    queue.push("b", "b2");
    queue.push("b", "b3");
    expect(serveOneAtATime(queue, { tenant: "a", item: "a2" }, 10)).toEqual(["a2", "b2", "a3", "b3", "a4"]);
  });

  it("gives a withdrawn request's turn back when it was the last of its line", () => {
    const queue = new FairQueue<string>();
    queue.start("a");
    queue.push("a", "a1");
    queue.push("a", "a2");
    queue.push("b", "b1");
    expect(queue.delete("a", "a2")).toBe(true);
    expect(queue.delete("a", "a2")).toBe(false);
    expect(queue.delete("b", "a1")).toBe(false);
    queue.push("a", "a3");
    expect([...queue.items()]).toEqual(["a1", "a3", "b1"]);
    expect(serveOneAtATime(queue, { tenant: "a", item: "a0" }, 10)).toEqual(["a0", "b1", "a1", "a3"]);
  });

  it("makes room by refusing the latest request of the tenant whose load (running and waiting) is greatest", () => {
    const queue = new FairQueue<string>();
    queue.start("a");
    queue.start("a");
    for (const item of ["a2", "a3"]) queue.push("a", item);
    queue.push("b", "b1");
    // a: 2 running + 2 waiting; c: 0 + 1 with its newcomer.
    expect(queue.makeRoomFor("c")).toBe("a3");
    expect([...queue.items()]).toEqual(["a2", "b1"]);
    queue.push("c", "c1");
    // a's load is 3, b's 1: another of b's takes a's last waiting place, and both are at 2.
    expect(queue.makeRoomFor("b")).toBe("a2");
    queue.push("b", "b2");
    // a's load is 2, b's 2 and c's 1: loads that differ by one stay as they are.
    expect(queue.makeRoomFor("c")).toBeUndefined();
    expect(queue.makeRoomFor("a")).toBeUndefined();
    expect(queue.makeRoomFor("d")).toBe("b2");
    expect([...queue.items()]).toEqual(["b1", "c1"]);
  });

  it("does not refuse the waiting request of a tenant running nothing for one that runs everything", () => {
    const queue = new FairQueue<string>();
    queue.start("a");
    queue.push("b", "b1");
    queue.push("b", "b2");
    // b's load is 2, a's would be 2 with its newcomer: a's newcomer is the one refused.
    expect(queue.makeRoomFor("a")).toBeUndefined();
    expect(queue.size).toBe(2);
  });

  it("refuses nothing in an empty queue, or for the tenant with the greatest load", () => {
    const queue = new FairQueue<string>();
    expect(queue.makeRoomFor("a")).toBeUndefined();
    queue.push("a", "a1");
    queue.push("a", "a2");
    expect(queue.makeRoomFor("a")).toBeUndefined();
    expect(queue.size).toBe(2);
  });
});
