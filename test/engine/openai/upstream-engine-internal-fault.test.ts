import { afterEach, describe, expect, it, vi } from "vitest";
import type { EngineLogger } from "../../../src/engine/create-engine.ts";
import type { AppError } from "../../../src/errors/app-error.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  collectParts,
  createTestEngine,
  firstError,
  startTestMock,
  textOf,
  upstreamModel,
} from "./engine-helpers.ts";
import { streamText } from "./mock-upstream.ts";

/** The text that makes the chunk mapper fail, as a bug in it would. */
const FAULT = "<trip the mapper>";

// A fault in Tollgate's own reading of an answer, simulated in the chunk mapper: it throws a
// TypeError on a chunk whose content is FAULT.
vi.mock("../../../src/engine/openai/create-chunk-mapper.ts", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../../src/engine/openai/create-chunk-mapper.ts")>();
  return {
    ...original,
    createChunkMapper: (secrets: readonly string[]) => {
      const mapper = original.createChunkMapper(secrets);
      const read = mapper.read.bind(mapper);
      mapper.read = (chunk, parts, event) => {
        const content = (chunk as { choices?: { delta?: { content?: unknown } }[] }).choices?.[0]?.delta
          ?.content;
        if (content === FAULT) throw new TypeError("Cannot read properties of undefined (reading 'x')");
        return read(chunk, parts, event);
      };
      return mapper;
    },
  };
});

afterEach(closeEnginesAndMocks);

async function setUp(texts: string[]) {
  const upstream = await startTestMock(streamText(texts));
  const backupUpstream = await startTestMock(streamText(["from the backup"]));
  const logged: { object: object; message: string | undefined }[] = [];
  const logger: EngineLogger = {
    info: () => {},
    warn: () => {},
    error: (object, message) => logged.push({ object, message }),
  };
  const backup = createTestEngine({ model: upstreamModel([backupUpstream.baseUrl], { id: "backup" }) });
  const engine = createTestEngine({
    model: upstreamModel([upstream.baseUrl], { fallbacks: ["backup"] }),
    resolveEngine: (id) => (id === "backup" ? backup : undefined),
    logger,
  });
  return { upstream, backupUpstream, engine, logged };
}

describe("upstream engine: a fault in Tollgate's own code", () => {
  it("is a 500 before the first part: logged with its cause, not retried, no fallback", async () => {
    const { upstream, backupUpstream, engine, logged } = await setUp([FAULT, "more"]);
    const error = (await firstError(engine)) as AppError;
    expect(error).toMatchObject({ code: "internal_error", status: 500 });
    expect(error.message).toBe(
      "The server had an error while reading the answer of the model 'remote'. Please retry.",
    );
    expect(upstream.requests).toHaveLength(1);
    expect(backupUpstream.requests).toHaveLength(0);
    expect(logged).toHaveLength(1);
    const [entry] = logged;
    expect(entry?.message).toBe("reading an upstream answer failed in Tollgate");
    expect((entry?.object as { err?: unknown } | undefined)?.err).toBeInstanceOf(TypeError);

    // The endpoint is not taken for a failing one: the next request goes to it and succeeds.
    upstream.handle(streamText(["fine"]));
    expect(textOf(await collectParts(engine, chatRequest()))).toBe("fine");
    expect(upstream.requests).toHaveLength(2);
  });

  it("ends a started answer with an internal_error part that counts what was generated", async () => {
    const { engine, logged } = await setUp(["Hello", " there", FAULT, "never"]);
    const parts = await collectParts(engine);
    expect(textOf(parts)).toBe("Hello there");
    const last = parts.at(-1);
    expect(last).toMatchObject({ type: "error", error: { code: "internal_error" } });
    expect(last?.type === "error" ? last.usage.completionTokens : 0).toBeGreaterThan(0);
    expect(logged).toHaveLength(1);
  });
});
