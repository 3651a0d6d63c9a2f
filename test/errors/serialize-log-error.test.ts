import { describe, expect, it } from "vitest";
import { serializeLogError } from "../../src/errors/serialize-log-error.ts";

/** An error as ioredis makes one for a refused command: the command and its arguments on it. */
function refusedAuth(): Error {
  return Object.assign(new Error("WRONGPASS invalid username-password pair"), {
    command: { name: "auth", args: ["nobody", "the-password"] },
  });
}

describe("serializeLogError", () => {
  it("keeps a failed Redis command's name and drops its arguments, in members and nested fields too", () => {
    const error = refusedAuth();
    const aggregate = new AggregateError([refusedAuth()], "every address failed");
    const nested = {
      inner: { a: { b: { c: { command: { name: "hello", args: ["3", "AUTH", "u", "pw"] } } } } },
    };
    const text = JSON.stringify([error, aggregate, nested].map(serializeLogError));
    expect(text).not.toMatch(/the-password|"pw"/);
    expect(serializeLogError(error)).toMatchObject({
      type: "Error",
      message: "WRONGPASS invalid username-password pair",
      command: { name: "auth" },
    });
  });

  it("leaves the caller's objects as they were", () => {
    const error = refusedAuth();
    const plain = { command: { name: "auth", args: ["secret"] } };
    expect(serializeLogError(plain)).toEqual({ command: { name: "auth" } });
    expect(plain.command.args).toEqual(["secret"]);
    serializeLogError(error);
    expect((error as Error & { command: { args: string[] } }).command.args).toEqual([
      "nobody",
      "the-password",
    ]);
  });
});
