import type { StreamPart } from "../engine.ts";
import { convertCompletionToChunk, hasChoices } from "./convert-completion-to-chunk.ts";
import type { ChunkMapper } from "./create-chunk-mapper.ts";
import { createSseParser, type ServerSentEvent } from "./create-sse-parser.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { readErrorBody, type UpstreamErrorBody } from "./read-error-body.ts";
import {
  beginsAsJson,
  isCutEvent,
  keepUnparsed,
  MAX_ANSWER_LENGTH,
  MAX_ANSWER_TEXT,
} from "./read-upstream-body.ts";

/**
 * Reads the body of one upstream answer, an event stream or one JSON object, into parts (through
 * the chunk mapper), and keeps what the attempt's end needs: whether the answer ended, the error
 * the upstream sent, what it sent at all (for `describeNothing`, describe-upstream-fault.ts).
 */
export interface AnswerReader {
  /** `[DONE]` came, or a whole JSON answer that is a completion. */
  readonly done: boolean;
  /**
   * The error the upstream sent (an error event, `{"error": ...}`), or what broke the protocol
   * (see {@link fail}); once set, nothing more is read.
   */
  readonly streamError: UpstreamErrorBody | undefined;
  /** Events read as chunks (not `[DONE]`, not errors): whether the upstream sent any. */
  readonly chunksRead: number;
  /** The answer was one JSON object (see {@link readWhole}); `notCompletion`: one without `choices`. */
  readonly wholeAnswer: boolean;
  readonly notCompletion: boolean;
  /** The response's content type when it is neither an event stream nor JSON: set by the caller. */
  unexpectedType: string | undefined;
  /**
   * Reads the next piece of an event stream, appending its parts to `parts`; stops at `[DONE]`
   * or an error. `onActivity` runs when the piece parsed as (part of) events.
   */
  push(text: string, parts: StreamPart[]): void;
  /**
   * Whether the answer, the body held as bare JSON, or one event grew past
   * {@link MAX_ANSWER_LENGTH}: then {@link streamError} says so, and nothing more should be read.
   */
  outgrown(): boolean;
  /**
   * The event stream ended: reads the event it ended inside of, or else the body as one bare
   * JSON answer (an error, or a whole completion) when it held no event.
   */
  end(parts: StreamPart[]): void;
  /** Reads a JSON answer: the data is a whole `chat.completion` (see convert-completion-to-chunk.ts). */
  readWhole(text: string, parts: StreamPart[]): void;
  /** The upstream broke the protocol: sets {@link streamError} to say `why` (Tollgate's words). */
  fail(why: string): void;
  /**
   * The upstream said it was done without any answer: a `[DONE]` before any chunk at all, or a
   * whole JSON answer with no text, reasoning, call or finish reason. That is no empty completion
   * but a broken upstream, and fails like one that closed the stream before sending anything.
   * Chunks that carry no finish reason are taken for an empty answer: some upstreams never send
   * one (Gemini proxies send null throughout, older Ollama ""). `hasParts`: parts were produced.
   */
  answeredNothing(hasParts: boolean): boolean;
}

/**
 * Characters an unfinished event must grow by to count as the upstream's activity: a long event
 * on a slow link does, a drip of a byte a second does not.
 */
const PENDING_GROWTH_ACTIVITY = 1024;

/**
 * One reader per attempt that got a 2xx; `onActivity` is the upstream's activity for the stall
 * watchdog: events that move the answer on, or an unfinished one growing by
 * {@link PENDING_GROWTH_ACTIVITY}; not comments alone (`: PROCESSING`, sent by some servers while
 * they queue), nor chunks that carry nothing, which would keep a hung upstream's request waiting
 * for ever.
 */
export function createAnswerReader(
  mapper: ChunkMapper,
  endpoint: UpstreamEndpoint,
  onActivity: () => void,
): AnswerReader {
  return new UpstreamAnswerReader(mapper, endpoint, onActivity);
}

/** A class, not a closure: one per upstream answer, its state read by fields. */
class UpstreamAnswerReader implements AnswerReader {
  done = false;
  streamError: UpstreamErrorBody | undefined;
  chunksRead = 0;
  wholeAnswer = false;
  notCompletion = false;
  unexpectedType: string | undefined;
  readonly #mapper: ChunkMapper;
  readonly #endpoint: UpstreamEndpoint;
  readonly #onActivity: () => void;
  readonly #parser = createSseParser();
  /**
   * The body's text while it has held no event: an upstream that answers an event stream with
   * bare JSON (an error, or a whole completion) is read as such. Kept up to the error body's
   * bound, and past it only while it begins as JSON does, up to a whole answer's: a completion
   * dropped there would be retried, each retry a generation paid for upstream.
   */
  #unparsed: string | undefined = "";
  /** The unfinished event's length at the last activity (see {@link push}). */
  #pendingAtActivity = 0;

  constructor(mapper: ChunkMapper, endpoint: UpstreamEndpoint, onActivity: () => void) {
    this.#mapper = mapper;
    this.#endpoint = endpoint;
    this.#onActivity = onActivity;
  }

  push(text: string, parts: StreamPart[]): void {
    const parser = this.#parser;
    const events = parser.push(text);
    if (this.#unparsed !== undefined)
      this.#unparsed = events.length === 0 ? keepUnparsed(this.#unparsed, text) : undefined;
    const progressBefore = this.#progress(parts);
    for (const event of events) {
      this.#readEvent(event, parts);
      if (this.done || this.streamError !== undefined) break;
    }
    // Activity is progress of the answer, or an event still coming in at a rate no drip keeps
    // up: chunks that carry nothing (empty choices, an empty delta, the same usage again), or a
    // line that grows a byte a second, kept a hung upstream's request waiting for as long as it
    // went on, as comment lines would have.
    if (this.#progress(parts) !== progressBefore || this.done || this.streamError !== undefined) {
      this.#pendingAtActivity = parser.pendingLength;
      this.#onActivity();
    } else if (parser.pendingLength < this.#pendingAtActivity) this.#pendingAtActivity = parser.pendingLength;
    else if (parser.pendingLength - this.#pendingAtActivity >= PENDING_GROWTH_ACTIVITY) {
      this.#pendingAtActivity = parser.pendingLength;
      this.#onActivity();
    }
  }

  /** How far the answer has got: text, reasoning and calls produced, parts out, a finish, usage. */
  #progress(parts: readonly StreamPart[]): number {
    const mapper = this.#mapper;
    return (
      mapper.producedLength +
      mapper.logprobsLength +
      parts.length +
      (mapper.rawFinishReason === undefined ? 0 : 1) +
      (mapper.reportedUsage === undefined ? 0 : 1) +
      (mapper.calledTools ? 1 : 0)
    );
  }

  outgrown(): boolean {
    // A body that has held no event yet is a bare answer, however the parser holds it.
    // Log probabilities are held with the text until the answer is whole (a client that asked
    // for one JSON answer): bounded with it.
    const mapper = this.#mapper;
    const tooLong =
      mapper.producedLength + mapper.logprobsLength > MAX_ANSWER_LENGTH ||
      (this.#unparsed?.length ?? 0) > MAX_ANSWER_LENGTH
        ? "an answer"
        : this.#parser.pendingLength > MAX_ANSWER_LENGTH
          ? "an event"
          : undefined;
    if (tooLong === undefined) return false;
    this.fail(`${tooLong} longer than ${MAX_ANSWER_TEXT}`);
    return true;
  }

  end(parts: StreamPart[]): void {
    if (this.done || this.streamError !== undefined) return;
    const last = this.#parser.end();
    if (last !== undefined) {
      // After the model's finish reason, an event the body ended inside of was cut on its way
      // (most often the usage chunk): dropped, as the SSE standard drops an event the stream
      // ended in; the answer is whole, its usage estimated (conclude, start-upstream-attempt.ts).
      if (this.#mapper.rawFinishReason === undefined || !isCutEvent(last)) this.#readEvent(last, parts);
    } else if (this.#unparsed !== undefined && beginsAsJson(this.#unparsed))
      this.#readEvent({ event: undefined, data: this.#unparsed }, parts, true);
  }

  readWhole(text: string, parts: StreamPart[]): void {
    this.#readEvent({ event: undefined, data: text }, parts, true);
  }

  fail(why: string): void {
    this.streamError = malformed(why);
  }

  answeredNothing(hasParts: boolean): boolean {
    const mapper = this.#mapper;
    return (
      (this.wholeAnswer || this.chunksRead === 0) &&
      !hasParts &&
      mapper.producedLength === 0 &&
      !mapper.calledTools &&
      mapper.rawFinishReason === undefined
    );
  }

  /** Reads one event; `whole`: the data is a whole `chat.completion` (see convert-completion-to-chunk.ts). */
  #readEvent(event: ServerSentEvent, parts: StreamPart[], whole = false): void {
    if (event.data === "[DONE]") {
      this.done = true;
      return;
    }
    const isError = event.event === "error";
    if (event.data === "" && !isError) return;
    // After the model's finish reason the answer is whole: what breaks the protocol then (an
    // event that is no JSON, `[DONE] ` with a space, an error) ends it, as a stream cut there does
    // (its usage estimated where it had none yet), rather than throw away an answer generated
    // and paid for upstream.
    const finished = !whole && this.#mapper.rawFinishReason !== undefined;
    let chunk: unknown;
    try {
      chunk = JSON.parse(event.data);
    } catch {
      if (finished) {
        this.done = true;
        return;
      }
      // An error event's text is its message.
      const { secrets, names } = this.#endpoint;
      this.streamError = isError
        ? readErrorBody(event.data, secrets, { names })
        : malformed(whole ? "an answer that is not JSON" : "an event that is not JSON");
      return;
    }
    if (!whole) {
      // A whole completion sent as an event (gateways that stream a non-streamed answer as one
      // event) says its text in `message`, which a chunk's reading would pass over; after chunks
      // that said the answer (reasoning is not it), only what they did not (no doubled text).
      const mapper = this.#mapper;
      const error = mapper.read(
        (chunk as { object?: unknown } | null)?.object === "chat.completion"
          ? convertCompletionToChunk(
              chunk,
              mapper.producedBytes > mapper.reasoningBytes || mapper.calledTools
                ? { calledTools: mapper.calledTools, content: mapper.contentSoFar }
                : undefined,
              mapper.reasoningBytes > 0,
            )
          : chunk,
        parts,
        event.event,
      );
      if (error === undefined) this.chunksRead++;
      else if (finished) this.done = true;
      else this.streamError = error;
      return;
    }
    this.wholeAnswer = true;
    this.streamError = this.#mapper.read(convertCompletionToChunk(chunk), parts);
    if (this.streamError !== undefined) return;
    // A completion is complete in itself; anything else (no choices) is no answer.
    if (hasChoices(chunk)) this.done = true;
    else this.notCompletion = true;
  }
}

/**
 * What an upstream that broke the protocol sent, as an upstream's error event is read: `why` in
 * Tollgate's own words (`unreadable`), which log lines may quote, unlike an upstream's `message`.
 */
function malformed(why: string): UpstreamErrorBody {
  return { message: undefined, type: undefined, code: undefined, param: undefined, unreadable: why };
}
