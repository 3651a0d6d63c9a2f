import type {
  CompletionTokensDetail,
  FinishReason,
  Logprobs,
  PartBatch,
  PromptTokensDetail,
  TokenLogprob,
  ToolCall,
  Usage,
} from "../engine/engine.ts";
import type { AppError } from "../errors/app-error.ts";

/** Token usage on the wire. */
export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: Partial<Record<PromptTokensDetail, number>>;
  completion_tokens_details?: Partial<Record<CompletionTokensDetail, number>>;
}

/** The wire's finish reasons; engine reasons without a wire meaning become `stop`. */
export type WireFinishReason = "stop" | "length" | "tool_calls" | "content_filter";

export function toWireFinishReason(reason: FinishReason): WireFinishReason {
  switch (reason) {
    case "stop":
    case "length":
    case "tool_calls":
    case "content_filter":
      return reason;
    case "error":
    case "other":
      return "stop";
    default: {
      const unreachable: never = reason;
      return unreachable;
    }
  }
}

/**
 * Unknown counts are sent as 0: the wire has no way to say "unknown". An upstream's breakdowns
 * (cached prompt tokens, reasoning tokens) go with the counts they break down.
 */
export function toWireUsage(usage: Usage): WireUsage {
  const prompt = usage.promptTokens ?? 0;
  const completion = usage.completionTokens ?? 0;
  const wire: WireUsage = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
  };
  const details = usage.details;
  if (details === undefined) return wire;
  if (details.prompt !== undefined) wire.prompt_tokens_details = details.prompt;
  if (details.completion !== undefined) wire.completion_tokens_details = details.completion;
  return wire;
}

/** Identity shared by a completion and all chunks of one stream. */
export interface CompletionIdentity {
  id: string;
  created: number;
  model: string;
}

/** What a whole run produced, gathered from its parts. */
export interface CollectedCompletion {
  text: string;
  /** The model's refusal, "" when it did not refuse. */
  refusal: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  rawFinishReason: string | undefined;
  usage: Usage;
  /** Set when the run failed after it started. */
  error: AppError | undefined;
  /** The log probabilities of the output's tokens, in order, where the engine gave any. */
  logprobs?: Logprobs;
}

/** The log probabilities of a run's parts, gathered as they come (see {@link collectCompletion}). */
class LogprobsCollector {
  content: TokenLogprob[] | null = null;
  refusal: TokenLogprob[] | null = null;
  /** Whether any part carried some. */
  added = false;

  add(logprobs: Logprobs): void {
    this.added = true;
    if (logprobs.content !== null) this.content = append(this.content, logprobs.content);
    if (logprobs.refusal !== null) this.refusal = append(this.refusal, logprobs.refusal);
  }

  result(): Logprobs {
    return { content: this.content, refusal: this.refusal };
  }
}

/** `list` with `entries` added at its end; one loop, as a spread of a long list could exceed the stack. */
function append(list: TokenLogprob[] | null, entries: readonly TokenLogprob[]): TokenLogprob[] {
  const all = list ?? [];
  for (const entry of entries) all.push(entry);
  return all;
}

/** Gathers one run's parts into a {@link CollectedCompletion}. */
export async function collectCompletion(batches: AsyncIterable<PartBatch>): Promise<CollectedCompletion> {
  let text = "";
  let refusal = "";
  const toolCalls: ToolCall[] = [];
  const logprobs = new LogprobsCollector();
  const logprobsOf = () => (logprobs.added ? { logprobs: logprobs.result() } : {});
  for await (const parts of batches) {
    for (const part of parts) {
      switch (part.type) {
        case "text-delta":
          text += part.text;
          if (part.logprobs !== undefined) logprobs.add(part.logprobs);
          break;
        case "refusal-delta":
          refusal += part.text;
          if (part.logprobs !== undefined) logprobs.add(part.logprobs);
          break;
        case "tool-call-delta": {
          if (part.logprobs !== undefined) logprobs.add(part.logprobs);
          const call = toolCalls[part.index] ?? { id: "", name: "", arguments: "" };
          toolCalls[part.index] = call;
          if (part.id !== undefined) call.id = part.id;
          if (part.name !== undefined) call.name = part.name;
          call.arguments += part.argumentsDelta;
          break;
        }
        case "finish":
          return {
            text,
            refusal,
            toolCalls,
            finishReason: part.reason,
            rawFinishReason: part.rawReason,
            usage: part.usage,
            error: undefined,
            ...logprobsOf(),
          };
        case "error":
          return {
            text,
            refusal,
            toolCalls,
            finishReason: "error",
            rawFinishReason: undefined,
            usage: part.usage,
            error: part.error,
            ...logprobsOf(),
          };
        default: {
          const unreachable: never = part;
          throw new Error(`unknown stream part ${JSON.stringify(unreachable)}`);
        }
      }
    }
  }
  throw new Error("engine stream ended without a finish part");
}

/** The non-streamed response body (`object: "chat.completion"`). */
export function renderChatCompletion(identity: CompletionIdentity, completion: CollectedCompletion) {
  const toolCalls = completion.toolCalls.filter((call) => call !== undefined);
  return {
    id: identity.id,
    object: "chat.completion" as const,
    created: identity.created,
    model: identity.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant" as const,
          content: completion.text,
          // null unless the model refused, as OpenAI sends it (its SDK's type has the field
          // always); `content` stays a string, as the contract has it.
          refusal: completion.refusal === "" ? null : completion.refusal,
          ...(toolCalls.length > 0
            ? {
                tool_calls: toolCalls.map((call) => ({
                  id: call.id,
                  type: "function" as const,
                  function: { name: call.name, arguments: call.arguments },
                })),
              }
            : {}),
        },
        // Null unless the request asked for them and the engine gave some, as OpenAI sends it.
        logprobs: completion.logprobs ?? null,
        finish_reason: toWireFinishReason(completion.finishReason),
      },
    ],
    usage: toWireUsage(completion.usage),
  };
}
