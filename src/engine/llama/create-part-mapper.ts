import { randomBytes } from "node:crypto";
import type { LlamaChatResponse, LlamaChatResponseFunctionCallParamsChunk } from "node-llama-cpp";
import type { StreamPart } from "../engine.ts";
import { createToolCallScanner, type ToolCallScanner } from "./create-tool-call-scanner.ts";
import type { GenerationPlan } from "./plan-generation.ts";

/** What LlamaChat reports at the end of a generation, whichever functions it had. */
export type LlamaChatResult = LlamaChatResponse<undefined> | LlamaChatResponse<Record<string, never>>;

/** Receives LlamaChat's callbacks during one generation and emits stream parts. */
export interface PartMapper {
  onText(text: string): void;
  onFunctionCallParams(chunk: LlamaChatResponseFunctionCallParamsChunk): void;
  /** Emits what only the final response tells (calls whose parameters never streamed). */
  onEnd(result: Pick<LlamaChatResult, "functionCalls">): void;
  /** Whether a tool call was emitted: how a `call-or-json` generation that ends naturally finishes. */
  readonly calledFunctions: boolean;
}

/**
 * Turns LlamaChat's callbacks into stream parts, per plan (see plan-generation.ts): text as
 * text deltas; for forced calls the grammar-constrained text as tool-call deltas (through a
 * scanner that finds the arguments, and in the envelope the name); for `functions` the streamed
 * parameters as tool-call deltas, cut to the JSON value (the library's chunks may carry the call
 * syntax's suffix).
 *
 * Every call starts with a delta of its own that carries its id and name and `arguments: ""`, as
 * OpenAI streams it (SPEC §4), whichever plan made it; its arguments follow in later deltas.
 */
export function createPartMapper(plan: GenerationPlan, emit: (part: StreamPart) => void): PartMapper {
  let called = false;
  const mapper = mapParts(plan, (part) => {
    if (part.type === "tool-call-delta") called = true;
    emit(part);
  });
  return {
    onText: mapper.onText,
    onFunctionCallParams: mapper.onFunctionCallParams,
    onEnd: mapper.onEnd,
    get calledFunctions() {
      return called;
    },
  };
}

function mapParts(
  plan: GenerationPlan,
  emit: (part: StreamPart) => void,
): Omit<PartMapper, "calledFunctions"> {
  const continueCall = (index: number, argumentsDelta: string) => {
    if (argumentsDelta !== "") emit({ type: "tool-call-delta", index, argumentsDelta });
  };
  const startCall = (index: number, name: string, argumentsDelta: string) => {
    emit({ type: "tool-call-delta", index, id: createToolCallId(), name, argumentsDelta: "" });
    continueCall(index, argumentsDelta);
  };
  const emitText = (text: string) => {
    if (text !== "") emit({ type: "text-delta", text });
  };
  const ignore = () => {};

  switch (plan.kind) {
    case "text":
    case "json":
      return { onText: emitText, onFunctionCallParams: ignore, onEnd: ignore };
    case "tool-arguments": {
      const scanner = createToolCallScanner({ envelope: false });
      let started = false;
      return {
        onText: (text) => {
          const { argumentsDelta } = scanner.push(text);
          if (argumentsDelta === "") return;
          if (started) continueCall(0, argumentsDelta);
          else startCall(0, plan.toolName, argumentsDelta);
          started = true;
        },
        onFunctionCallParams: ignore,
        onEnd: ignore,
      };
    }
    case "tool-envelope":
    case "call-or-json": {
      // In `call-or-json` the envelope may hold an answer instead: its value is the content.
      const scanner = createToolCallScanner({ envelope: true, answer: plan.kind === "call-or-json" });
      let started = false;
      // The grammar puts the name first; arguments seen before it wait for it all the same.
      let pendingArguments = "";
      return {
        onText: (text) => {
          const { name, argumentsDelta, responseDelta } = scanner.push(text);
          emitText(responseDelta);
          if (name !== undefined && !started) {
            startCall(0, name, pendingArguments + argumentsDelta);
            started = true;
          } else if (started) {
            continueCall(0, argumentsDelta);
          } else {
            pendingArguments += argumentsDelta;
          }
        },
        onFunctionCallParams: ignore,
        onEnd: ignore,
      };
    }
    case "functions": {
      const scanners = new Map<number, ToolCallScanner>();
      return {
        onText: emitText,
        onFunctionCallParams: (chunk) => {
          let scanner = scanners.get(chunk.callIndex);
          const first = scanner === undefined;
          scanner ??= createToolCallScanner({ envelope: false });
          scanners.set(chunk.callIndex, scanner);
          const { argumentsDelta } = scanner.push(chunk.paramsChunk);
          if (first) startCall(chunk.callIndex, chunk.functionName, argumentsDelta);
          else continueCall(chunk.callIndex, argumentsDelta);
        },
        onEnd: (result) => {
          (result.functionCalls ?? []).forEach((functionCall, index) => {
            const scanner = scanners.get(index);
            const argumentsText = JSON.stringify(functionCall.params ?? {});
            // Calls without parameters are never streamed: the library fills them in itself.
            if (scanner === undefined) startCall(index, functionCall.functionName, argumentsText);
            else if (scanner.argumentsText.trim() === "") continueCall(index, argumentsText);
          });
        },
      };
    }
    default: {
      const unreachable: never = plan;
      throw new Error(`unknown plan ${JSON.stringify(unreachable)}`);
    }
  }
}

/** An id like OpenAI's: `call_` and 24 letters and digits. */
function createToolCallId(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return `call_${Array.from(randomBytes(24), (byte) => alphabet[byte % alphabet.length]).join("")}`;
}
