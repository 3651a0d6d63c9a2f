import { describe, expect, it } from "vitest";
import type { StreamPart } from "../../../src/engine/engine.ts";
import { createChunkMapper } from "../../../src/engine/openai/create-chunk-mapper.ts";
import { readLogprobs } from "../../../src/engine/openai/read-logprobs.ts";
import { chunk } from "./mock-upstream.ts";

/** A chunk whose choice has `delta` and `logprobs` as given. */
function withLogprobs(delta: Record<string, unknown>, logprobs: unknown) {
  return { ...chunk(delta), choices: [{ index: 0, delta, logprobs, finish_reason: null }] };
}

function entry(token: string, logprob = -1) {
  return { token, logprob, bytes: [...Buffer.from(token)], top_logprobs: [] };
}

function readAll(chunks: readonly unknown[], logprobs = true): StreamPart[] {
  const mapper = createChunkMapper([], [], undefined, logprobs);
  const parts: StreamPart[] = [];
  for (const value of chunks) mapper.read(value, parts);
  mapper.flush(parts);
  return parts;
}

describe("log probabilities in the chunk mapper", () => {
  it("leaves them alone when the request did not ask", () => {
    expect(readAll([withLogprobs({ content: "a" }, { content: [entry("a")] })], false)).toEqual([
      { type: "text-delta", text: "a" },
    ]);
  });

  it("drops those of reasoning, which the client does not get", () => {
    expect(
      readAll([
        withLogprobs({ reasoning_content: "think" }, { content: [entry("think")] }),
        withLogprobs({ content: "a" }, { content: [entry("a")] }),
      ]),
    ).toEqual([{ type: "text-delta", text: "a", logprobs: { content: [entry("a")], refusal: null } }]);
  });

  it("sends those of tokens that showed no text at the end, with an empty text", () => {
    expect(
      readAll([
        withLogprobs({ content: "a" }, null),
        withLogprobs({ content: "" }, { content: [entry("")] }),
      ]),
    ).toEqual([
      { type: "text-delta", text: "a" },
      { type: "text-delta", text: "", logprobs: { content: [entry("")], refusal: null } },
    ]);
  });

  it("puts those of a chunk that held half a character on what went out of it, and the rest on the next", () => {
    const parts = readAll([
      withLogprobs({ content: "a\ud83d" }, { content: [entry("a", -1)] }),
      withLogprobs({ content: "\ude00" }, { content: [entry("b", -2)] }),
    ]);
    expect(parts).toEqual([
      { type: "text-delta", text: "a", logprobs: { content: [entry("a", -1)], refusal: null } },
      { type: "text-delta", text: "\ud83d\ude00", logprobs: { content: [entry("b", -2)], refusal: null } },
    ]);
  });
});

describe("readLogprobs", () => {
  it("rebuilds OpenAI's fields only, with null bytes and [] alternatives where absent", () => {
    expect(
      readLogprobs({
        content: [
          {
            id: 7,
            token: "a",
            logprob: -0.5,
            extra: "x",
            top_logprobs: [{ token: "b", logprob: -2, id: 8 }],
          },
        ],
      })?.logprobs,
    ).toEqual({
      content: [
        { token: "a", logprob: -0.5, bytes: null, top_logprobs: [{ token: "b", logprob: -2, bytes: null }] },
      ],
      refusal: null,
    });
  });

  it("is undefined for none and for anything malformed", () => {
    for (const value of [
      null,
      "x",
      [],
      { content: null, refusal: null },
      { content: [] },
      { content: {} },
      { content: [{ token: 1, logprob: -1 }] },
      { content: [{ token: "a", logprob: Number.NEGATIVE_INFINITY }] },
      { content: [{ token: "a", logprob: -1, bytes: [256] }] },
      { content: [{ token: "a", logprob: -1, bytes: "ab" }] },
      { content: [{ token: "a", logprob: -1, top_logprobs: {} }] },
      { content: [{ token: "a", logprob: -1, top_logprobs: [{ token: "b" }] }] },
      { content: [entry("a")], refusal: "no" },
    ])
      expect(readLogprobs(value)).toBeUndefined();
  });
});
