import { describe, expect, it } from "vitest";
import { createRequestId } from "../../src/api/create-request-id.ts";

const GENERATED = /^req_[0-9a-f]{24}$/;

describe("createRequestId", () => {
  it.each([
    ["a UUID", "0b4a6f3e-8d1c-4b7e-9f2a-3c5d7e9f1a2b"],
    ["base64", "dGVzdA+/=="],
    ["a W3C trace parent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    ["a path-like id", "tenant/42:job#7"],
    ["128 characters", "x".repeat(128)],
  ])("keeps the client's id: %s", (_case, id) => {
    expect(createRequestId(id)).toBe(id);
  });

  it.each([
    ["none", undefined],
    ["empty", ""],
    ["with a space", "my id"],
    ["with a control character", "id\u0007"],
    ["not ASCII", "idé"],
    ["over 128 characters", "x".repeat(129)],
    ["sent twice", ["a", "b"]],
    ["an API key (headers mixed up)", "sk-tg-abcdefghijkl-0123456789abcdefghijklmnopqrstuv"],
  ])("makes a new id when the client's is %s", (_case, header) => {
    expect(createRequestId(header)).toMatch(GENERATED);
  });
});
