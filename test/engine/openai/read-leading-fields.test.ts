import { describe, expect, it } from "vitest";
import { readLeadingFields } from "../../../src/engine/openai/read-leading-fields.ts";

describe("readLeadingFields", () => {
  it("reads the fields an error object begins with, up to the first that is not simple", () => {
    const text =
      '{"error": {"message": "Invalid \\"x\\"\\u00e9", "type": "invalid_request_error", "param": null, "code": 400, "debug": {"trace": "Traceback';
    expect(readLeadingFields(text)).toEqual({
      fields: { message: 'Invalid "x"é', type: "invalid_request_error", code: "400" },
      cutField: undefined,
    });
  });

  it("reads a message the text was cut inside of as its start, without a cut escape", () => {
    expect(readLeadingFields('{"error":{"message":"too long: abc\\u00')).toEqual({
      fields: { message: "too long: abc" },
      cutField: "message",
    });
    expect(readLeadingFields('{"error":"over')).toEqual({ fields: { message: "over" }, cutField: "message" });
  });

  it("reads the fields at the top where the object does not begin with an error object", () => {
    expect(readLeadingFields('{"detail": "Not here", "extra": [1, 2')).toEqual({
      fields: { detail: "Not here" },
      cutField: undefined,
    });
  });

  it("reads nothing from what is no JSON object, or where a string is not valid JSON", () => {
    expect(readLeadingFields("[1, 2").fields).toEqual({});
    expect(readLeadingFields('{"error": {"message": "bad \\q escape"').fields).toEqual({});
    expect(readLeadingFields('{"error": {"debug": {"message": "hidden"}, "message": "late"}').fields).toEqual(
      {},
    );
  });
});
