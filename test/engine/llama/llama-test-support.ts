import type { CatalogModel } from "../../../src/catalog/catalog.ts";
import type { ChatRequest, PreparedChat, StreamPart } from "../../../src/engine/engine.ts";
import { createChatRequest } from "../../support/create-chat-request.ts";

/** A catalogue entry for a local test model; CPU only, one thread (the machine has two cores). */
export function createTestCatalogModel(options: {
  path: string;
  contextLength?: number;
  parallel?: number;
  maxQueue?: number;
}): CatalogModel {
  return {
    id: "test/tiny:f32",
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "2" },
    contextLength: options.contextLength,
    created: 0,
    engine: {
      type: "llama",
      model: options.path,
      parallel: options.parallel ?? 1,
      maxQueue: options.maxQueue ?? 4,
      threads: 1,
      gpu: false,
    },
  };
}

/** A plain request, greedy (temperature 0) so that the local model's output is repeatable. */
export function createTestRequest(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return createChatRequest({ temperature: 0, ...overrides });
}

/** Runs a prepared request to its end and returns every part. */
export async function collectParts(
  prepared: PreparedChat,
  signal: AbortSignal = new AbortController().signal,
): Promise<StreamPart[]> {
  const parts: StreamPart[] = [];
  for await (const batch of prepared.run(signal)) parts.push(...batch);
  return parts;
}

/** The text of the text deltas. */
export function readText(parts: readonly StreamPart[]): string {
  return parts.map((part) => (part.type === "text-delta" ? part.text : "")).join("");
}

/** The tool calls the deltas describe, by index. */
export function readToolCalls(
  parts: readonly StreamPart[],
): { id: string; name: string; arguments: string }[] {
  const calls: { id: string; name: string; arguments: string }[] = [];
  for (const part of parts) {
    if (part.type !== "tool-call-delta") continue;
    const call = calls[part.index];
    if (call === undefined) {
      if (part.id === undefined || part.name === undefined)
        throw new Error("first delta without id and name");
      calls[part.index] = { id: part.id, name: part.name, arguments: part.argumentsDelta };
    } else {
      if (part.id !== undefined || part.name !== undefined) throw new Error("later delta with id or name");
      call.arguments += part.argumentsDelta;
    }
  }
  return calls;
}

/** The last part, which must be the only `finish` or `error` part. */
export function readEnd(parts: readonly StreamPart[]): Extract<StreamPart, { type: "finish" | "error" }> {
  const ends = parts.filter(
    (part): part is Extract<StreamPart, { type: "finish" | "error" }> =>
      part.type === "finish" || part.type === "error",
  );
  const [end] = ends;
  if (ends.length !== 1 || end === undefined || parts.at(-1) !== end) {
    throw new Error("a stream must end with exactly one finish or error part");
  }
  return end;
}
