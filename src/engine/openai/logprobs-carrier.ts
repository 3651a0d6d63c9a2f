import type { Logprobs, StreamPart, TokenLogprob } from "../engine.ts";
import { readLogprobs } from "./read-logprobs.ts";

/** A part of output: one that may carry log probabilities. */
type OutputPart = Extract<StreamPart, { logprobs?: Logprobs }>;

/**
 * Takes an answer's log probabilities, chunk by chunk, to the parts the chunk mapper makes of
 * them (create-chunk-mapper.ts; one per answer that asked for them). A chunk's go out on the
 * first part made from it. Those of a chunk that made no part (a token that is part of a
 * character, whose text the upstream or the mapper holds for the next) go out with the next part,
 * or at the end; those of a chunk that held only reasoning are dropped with it (the client gets
 * neither its text nor its tokens).
 */
export class LogprobsCarrier {
  /** About the characters of those passed on so far (see read-logprobs.ts). */
  length = 0;
  /** Those of chunks that made no part yet. */
  #pending: Logprobs | undefined;

  /**
   * A chunk's `logprobs` (`value`, as the upstream sent them), once its delta was read into
   * `parts` from `partsBefore`; `reasoned`: the delta held reasoning.
   */
  read(value: unknown, parts: StreamPart[], partsBefore: number, reasoned: boolean): void {
    const read = readLogprobs(value);
    if (parts.length === partsBefore) {
      if (read === undefined || reasoned) return;
      this.length += read.length;
      this.#pending =
        this.#pending === undefined ? read.logprobs : joinLogprobs(this.#pending, read.logprobs);
      return;
    }
    if (read !== undefined) this.length += read.length;
    this.#attach(parts[partsBefore] as OutputPart, read?.logprobs);
  }

  /**
   * The answer ended, and what the mapper held went into `parts` from `partsBefore`: what is
   * pending goes on its first part, or on an empty text of its own.
   */
  flush(parts: StreamPart[], partsBefore: number): void {
    if (this.#pending === undefined) return;
    if (parts.length === partsBefore) parts.push({ type: "text-delta", text: "" });
    this.#attach(parts[partsBefore] as OutputPart, undefined);
  }

  /** Puts what is pending and `logprobs` on `part`. */
  #attach(part: OutputPart, logprobs: Logprobs | undefined): void {
    const pending = this.#pending;
    this.#pending = undefined;
    const all =
      pending === undefined ? logprobs : logprobs === undefined ? pending : joinLogprobs(pending, logprobs);
    if (all !== undefined) part.logprobs = all;
  }
}

/** The log probabilities of two pieces of output, in order. */
function joinLogprobs(first: Logprobs, second: Logprobs): Logprobs {
  return {
    content: joinList(first.content, second.content),
    refusal: joinList(first.refusal, second.refusal),
  };
}

function joinList(first: TokenLogprob[] | null, second: TokenLogprob[] | null): TokenLogprob[] | null {
  if (first === null) return second;
  if (second === null) return first;
  return first.concat(second);
}
