import { describe, expect, it } from "vitest";
import { createPartChannel } from "../../../src/engine/llama/create-part-channel.ts";

describe("createPartChannel", () => {
  it("hands over parts in order, all those buffered at once, then ends", async () => {
    const channel = createPartChannel<number>();
    channel.push(1);
    channel.push(2);
    const read: (number[] | undefined)[] = [await channel.next()];
    const waiting = channel.next();
    channel.push(3);
    read.push(await waiting);
    channel.push(4);
    channel.push(5);
    channel.close();
    channel.push(6);
    read.push(await channel.next(), await channel.next(), await channel.next());
    expect(read).toEqual([[1, 2], [3], [4, 5], undefined, undefined]);
  });

  it("ends a waiting reader when it closes", async () => {
    const channel = createPartChannel<number>();
    const waiting = channel.next();
    channel.close();
    expect(await waiting).toBeUndefined();
  });

  // After the first part, the reader must run after what the producer's event-loop turn schedules
  // with setImmediate (node-llama-cpp's next decode), not before: see createPartChannel.
  it("wakes a waiting reader after the immediates scheduled in the producer's turn", async () => {
    const channel = createPartChannel<string>();
    channel.push("first");
    await channel.next();
    const order: string[] = [];
    const reading = channel.next().then((part) => order.push(`read ${part}`));
    await producerTurn(() => channel.push("a"), order);
    await reading;
    expect(order).toEqual(["dispatch", "read a"]);
  });

  it("wakes the reader of the first part at once", async () => {
    const channel = createPartChannel<string>();
    const order: string[] = [];
    const reading = channel.next().then((part) => order.push(`read ${part}`));
    await producerTurn(() => channel.push("first"), order);
    await reading;
    expect(order).toEqual(["read first", "dispatch"]);
  });
});

/** Runs `produce` in an immediate that also schedules a "dispatch" immediate, like node-llama-cpp. */
function producerTurn(produce: () => void, order: string[]): Promise<void> {
  return new Promise((resolve) => {
    setImmediate(() => {
      produce();
      setImmediate(() => {
        order.push("dispatch");
        resolve();
      });
    });
  });
}
