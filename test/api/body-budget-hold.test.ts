import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { BodyBudget, type BodyHold } from "../../src/api/body-budget.ts";
import { AppError } from "../../src/errors/app-error.ts";

/** A request head declaring `headers`, as the budget reads it. */
function requestWith(headers: Record<string, string>): IncomingMessage {
  return { headers } as unknown as IncomingMessage;
}

/** A request body with `bytes` of it buffered, as Node leaves it before it is read. */
function bufferedBody(bytes: number): Readable {
  const body = new Readable({ read() {} });
  body.push(Buffer.alloc(bytes));
  return body;
}

function admitted(hold: BodyHold | AppError | undefined): BodyHold {
  if (hold === undefined || hold instanceof AppError) throw new Error(`not admitted: ${String(hold)}`);
  return hold;
}

describe("BodyBudget", () => {
  it("holds nothing for a request without a body", () => {
    const budget = new BodyBudget(100);
    expect(budget.admit(requestWith({}), 50, "account")).toBeUndefined();
    expect(budget.admit(requestWith({ "content-length": "0" }), 50, "account")).toBeUndefined();
  });

  it("takes a body that is in whole at once, the same stream read on, and refuses one whose bytes do not fit", () => {
    const budget = new BodyBudget(100);
    // Each declares 40 bytes, which fit beside the nothing held when they are admitted.
    const first = admitted(budget.admit(requestWith({ "content-length": "40" }), 50, "a"));
    const second = admitted(budget.admit(requestWith({ "content-length": "40" }), 50, "b"));
    const third = admitted(budget.admit(requestWith({ "transfer-encoding": "chunked" }), 50, "c"));
    const body = bufferedBody(40);
    expect(first.count(body)).toBe(body);
    expect(second.count(bufferedBody(40))).toBeInstanceOf(Readable);
    // Chunked, in whole: 30 bytes where 20 are left.
    const refused = third.count(Object.assign(bufferedBody(30), { complete: true }));
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).code).toBe("server_overloaded");
    expect((refused as AppError).retryAfterSeconds).toBe(1);
    // Its declared 40 bytes no longer fit beside the 80 received.
    expect(budget.admit(requestWith({ "content-length": "40" }), 50, "d")).toBeInstanceOf(AppError);
  });

  it("gives a request's bytes back once, however often it is told", () => {
    const budget = new BodyBudget(100);
    const first = admitted(budget.admit(requestWith({ "content-length": "60" }), 100, "a"));
    first.count(bufferedBody(60));
    const second = admitted(budget.admit(requestWith({ "content-length": "40" }), 100, "b"));
    second.count(bufferedBody(40));
    first.giveBack();
    first.giveBack();
    // 60 bytes are free, not 120: the second's 40 are still held.
    expect(budget.admit(requestWith({ "content-length": "61" }), 100, "c")).toBeInstanceOf(AppError);
    admitted(budget.admit(requestWith({ "content-length": "60" }), 100, "c"));
  });
});
