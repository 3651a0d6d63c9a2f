import { describe, expect, it } from "vitest";
import { createToolCallScanner } from "../../../src/engine/llama/create-tool-call-scanner.ts";

/** Feeds `text` in chunks of `size` characters; returns the name seen and the arguments text. */
function scan(text: string, options: { envelope: boolean; size: number }) {
  const scanner = createToolCallScanner({ envelope: options.envelope });
  let name: string | undefined;
  let argumentsText = "";
  for (let start = 0; start < text.length; start += options.size) {
    const result = scanner.push(text.slice(start, start + options.size));
    if (result.name !== undefined) name = result.name;
    argumentsText += result.argumentsDelta;
  }
  return { name, argumentsText, complete: scanner.argumentsComplete };
}

describe("createToolCallScanner", () => {
  const tricky = '{"city": "Paris \\"}{[ ", "days": [1, {"a": "]"}], "note": "\\\\"}';

  it.each([1, 2, 3, 7, 1000])("passes a bare arguments value through, chunks of %i", (size) => {
    const result = scan(`  ${tricky}\n\n\n\n`, { envelope: false, size });
    expect(result.argumentsText).toBe(tricky);
    expect(result.complete).toBe(true);
    expect(JSON.parse(result.argumentsText)).toEqual({
      city: 'Paris "}{[ ',
      days: [1, { a: "]" }],
      note: "\\",
    });
  });

  it("stops at the end of the value when a suffix follows", () => {
    expect(scan('{"a": 1}}\n</tool_call>', { envelope: false, size: 4 }).argumentsText).toBe('{"a": 1}');
  });

  it.each([1, 2, 5, 1000])("finds name and arguments inside an envelope, chunks of %i", (size) => {
    const text = `{"name": "get_weather", "arguments": ${tricky}}`;
    const result = scan(text, { envelope: true, size });
    expect(result.name).toBe("get_weather");
    expect(result.argumentsText).toBe(tricky);
    expect(result.complete).toBe(true);
  });

  it("accepts the envelope's keys in any order and with newlines", () => {
    const result = scan('{\n    "arguments": {"x": "name"},\n    "name": "a\\u0062"\n}', {
      envelope: true,
      size: 3,
    });
    expect(result.argumentsText).toBe('{"x": "name"}');
    expect(result.name).toBe("ab");
  });

  it("passes primitive arguments through", () => {
    expect(scan('{"name": "f", "arguments": 12.5}', { envelope: true, size: 1 }).argumentsText).toBe("12.5");
    expect(scan('{"name": "f", "arguments": "text"}', { envelope: true, size: 1 }).argumentsText).toBe(
      '"text"',
    );
    expect(scan('{"arguments": true, "name": "g"}', { envelope: true, size: 1 })).toEqual({
      name: "g",
      argumentsText: "true",
      complete: true,
    });
  });

  it("reports nothing for an arguments value that has not started", () => {
    const result = scan('{"name": "f", "argu', { envelope: true, size: 2 });
    expect(result).toEqual({ name: "f", argumentsText: "", complete: false });
  });

  describe("with answers (call-or-json)", () => {
    /** Feeds `text` in chunks of `size`; returns the name, arguments and response texts seen. */
    function scanAnswer(text: string, size: number) {
      const scanner = createToolCallScanner({ envelope: true, answer: true });
      const seen = { name: undefined as string | undefined, argumentsText: "", responseText: "" };
      for (let start = 0; start < text.length; start += size) {
        const result = scanner.push(text.slice(start, start + size));
        if (result.name !== undefined) seen.name = result.name;
        seen.argumentsText += result.argumentsDelta;
        seen.responseText += result.responseDelta;
      }
      return { ...seen, complete: scanner.argumentsComplete, scannedArguments: scanner.argumentsText };
    }

    it.each([1, 2, 5, 1000])("passes a response value through as the answer, chunks of %i", (size) => {
      expect(scanAnswer(`{"response": ${tricky}}\n\n`, size)).toEqual({
        name: undefined,
        argumentsText: "",
        responseText: tricky,
        complete: true,
        scannedArguments: "",
      });
      expect(scanAnswer('{ "response" : "a \\"quoted\\" {answer}" }', size).responseText).toBe(
        '"a \\"quoted\\" {answer}"',
      );
      expect(scanAnswer('{"response": -12.5e3}', size).responseText).toBe("-12.5e3");
    });

    it.each([1, 3, 1000])("still reports a call as a call, chunks of %i", (size) => {
      expect(scanAnswer('{"name": "response", "arguments": {"response": 1}}', size)).toEqual({
        name: "response",
        argumentsText: '{"response": 1}',
        responseText: "",
        complete: true,
        scannedArguments: '{"response": 1}',
      });
    });

    it("passes no response through without the answer option", () => {
      const result = scan('{"response": {"a": 1}}', { envelope: true, size: 1 });
      expect(result).toEqual({ name: undefined, argumentsText: "", complete: false });
    });
  });
});
