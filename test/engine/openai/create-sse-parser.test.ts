import { describe, expect, it } from "vitest";
import { createSseParser, type ServerSentEvent } from "../../../src/engine/openai/create-sse-parser.ts";

function parseInPieces(pieces: readonly string[]): ServerSentEvent[] {
  const parser = createSseParser();
  const events = pieces.flatMap((piece) => parser.push(piece));
  const last = parser.end();
  return last === undefined ? events : [...events, last];
}

describe("createSseParser", () => {
  it("dispatches data events on blank lines", () => {
    expect(parseInPieces(['data: {"a":1}\n\ndata: [DONE]\n\n'])).toEqual([
      { event: undefined, data: '{"a":1}' },
      { event: undefined, data: "[DONE]" },
    ]);
  });

  it("reassembles events split anywhere, including inside a CRLF", () => {
    const text = 'data: {"a":1}\r\n\r\ndata: {"b":2}\r\n\r\n';
    const expected = [
      { event: undefined, data: '{"a":1}' },
      { event: undefined, data: '{"b":2}' },
    ];
    for (let cut = 1; cut < text.length; cut++) {
      expect(parseInPieces([text.slice(0, cut), text.slice(cut)])).toEqual(expected);
    }
    expect(parseInPieces([...text])).toEqual(expected);
  });

  it("keeps a CRLF whole when an empty piece comes between its CR and LF (regression)", () => {
    // A decoder holding half a character hands on "": the "\n" after it ends no second line.
    expect(parseInPieces(["data: a\r", "", "\ndata: b\r\n\r\n"])).toEqual([
      { event: undefined, data: "a\nb" },
    ]);
  });

  it("reads llama.cpp's error field as an error event (regression: it was dropped)", () => {
    const error =
      '{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}';
    expect(parseInPieces([`error: ${error}\n\ndata: [DONE]\n\n`])).toEqual([
      { event: "error", data: error },
      { event: undefined, data: "[DONE]" },
    ]);
  });

  it("accepts lone CR line endings", () => {
    expect(parseInPieces(["data: x\r\rdata: y\r\r"])).toEqual([
      { event: undefined, data: "x" },
      { event: undefined, data: "y" },
    ]);
  });

  it("joins data lines, keeps event names, skips comments, ids and events without data", () => {
    expect(
      parseInPieces([": keep-alive\n\nid: 7\nretry: 100\n\nevent: error\ndata: line 1\ndata:line 2\n\n"]),
    ).toEqual([{ event: "error", data: "line 1\nline 2" }]);
  });

  it("returns an event left without a closing blank line at the end", () => {
    expect(parseInPieces(["data: last"])).toEqual([{ event: undefined, data: "last" }]);
  });

  it("counts what it holds for the event not complete yet, and forgets it once dispatched", () => {
    const parser = createSseParser();
    expect(parser.push("data: abc\ndata: de")).toEqual([]);
    // "abc" in a data line, "data: de" still unfinished.
    expect(parser.pendingLength).toBe(3 + 8);
    expect(parser.push("f\n")).toEqual([]);
    expect(parser.pendingLength).toBe(6);
    expect(parser.push("\n")).toEqual([{ event: undefined, data: "abc\ndef" }]);
    expect(parser.pendingLength).toBe(0);
  });
});
