import type { Logprobs, PartBatch, StreamPart } from "../engine/engine.ts";
import type { AppError } from "../errors/app-error.ts";
import { toWireError } from "./errors.ts";
import {
  type CompletionIdentity,
  toWireFinishReason,
  toWireUsage,
  type WireUsage,
} from "./render-chat-completion.ts";

/** The terminator event of every stream. */
export const SSE_DONE = "data: [DONE]\n\n";

/** Frames one JSON value as a Server-Sent Event. */
export function formatEvent(value: unknown): string {
  return `data: ${JSON.stringify(value)}\n\n`;
}

/**
 * The one serializer of engine parts into OpenAI `chat.completion.chunk` events. Every chunk
 * shares the stream's id, created and model; with `includeUsage` every chunk carries
 * `usage: null` and one last chunk with `choices: []` carries the usage, as OpenAI does.
 */
export class ChunkRenderer {
  readonly #identity: CompletionIdentity;
  readonly #includeUsage: boolean;
  /** The event up to the delta, the same in every chunk of the stream: serialised once. */
  readonly #prefix: string;
  /** The event after `finish_reason`'s value. */
  readonly #suffix: string;

  constructor(identity: CompletionIdentity, options: { includeUsage: boolean }) {
    this.#identity = identity;
    this.#includeUsage = options.includeUsage;
    // The same text (and key order) as `formatEvent` of the whole chunk object would give.
    this.#prefix = `data: {"id":${JSON.stringify(identity.id)},"object":"chat.completion.chunk","created":${JSON.stringify(identity.created)},"model":${JSON.stringify(identity.model)},"choices":[{"index":0,"delta":`;
    this.#suffix = options.includeUsage ? '}],"usage":null}\n\n' : "}]}\n\n";
  }

  /** `logprobs`: the log probabilities of the delta's tokens, where the engine gave them. */
  #chunk(delta: Record<string, unknown>, finishReason: string | null, logprobs?: Logprobs): string {
    return `${this.#prefix}${JSON.stringify(delta)},"logprobs":${logprobs === undefined ? "null" : JSON.stringify(logprobs)},"finish_reason":${JSON.stringify(finishReason)}${this.#suffix}`;
  }

  /** The first event: the assistant role with empty content. */
  start(): string {
    return this.#chunk({ role: "assistant", content: "" }, null);
  }

  /** The event(s) for one engine part; "" for a part that produces none. */
  part(part: StreamPart): string {
    switch (part.type) {
      // An empty text goes out only with the log probabilities of tokens that showed none.
      case "text-delta":
        return part.text === "" && part.logprobs === undefined
          ? ""
          : this.#chunk({ content: part.text }, null, part.logprobs);
      case "refusal-delta":
        return part.text === "" && part.logprobs === undefined
          ? ""
          : this.#chunk({ refusal: part.text }, null, part.logprobs);
      case "tool-call-delta": {
        const call: Record<string, unknown> = { index: part.index };
        if (part.id !== undefined) {
          call.id = part.id;
          call.type = "function";
        }
        call.function =
          part.name !== undefined
            ? { name: part.name, arguments: part.argumentsDelta }
            : { arguments: part.argumentsDelta };
        return this.#chunk({ tool_calls: [call] }, null, part.logprobs);
      }
      case "finish": {
        return (
          this.#chunk({}, toWireFinishReason(part.reason)) + this.#usage(toWireUsage(part.usage)) + SSE_DONE
        );
      }
      case "error":
        return this.error(part.error);
      default: {
        const unreachable: never = part;
        throw new Error(`unknown stream part ${JSON.stringify(unreachable)}`);
      }
    }
  }

  /**
   * The events for a batch of parts, as one text to write at once. `cut`: the error that cut the
   * run (a shutdown), sent in place of its `finish`.
   */
  parts(parts: PartBatch, cut?: AppError): string {
    if (parts.length === 1 && cut === undefined) return this.part(parts[0] as StreamPart);
    let events = "";
    for (const part of parts)
      events += cut !== undefined && part.type === "finish" ? this.error(cut) : this.part(part);
    return events;
  }

  /** An error after the stream started: an error event, then the terminator. */
  error(error: AppError): string {
    return formatEvent(toWireError(error)) + SSE_DONE;
  }

  #usage(usage: WireUsage): string {
    if (!this.#includeUsage) return "";
    return formatEvent({
      id: this.#identity.id,
      object: "chat.completion.chunk",
      created: this.#identity.created,
      model: this.#identity.model,
      choices: [],
      usage,
    });
  }
}
