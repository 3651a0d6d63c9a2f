import { AppError } from "../../errors/app-error.ts";
import { cutText } from "../../errors/cut-text.ts";
import type { EngineLogger } from "../create-engine.ts";
import type { StreamPart, Usage } from "../engine.ts";
import { convertCompletionToChunk } from "./convert-completion-to-chunk.ts";
import { type ChunkMapper, createChunkMapper } from "./create-chunk-mapper.ts";
import type { EndpointBalancer } from "./create-endpoint-balancer.ts";
import { createSseParser, type ServerSentEvent } from "./create-sse-parser.ts";
import type { StallKind, StallWatchdog } from "./create-stall-watchdog.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { describeTransportError, isProtocolFault } from "./describe-transport-error.ts";
import { isFailureFinishReason, mapFinishReason } from "./map-finish-reason.ts";
import { mapStreamError } from "./map-stream-error.ts";
import { mapUpstreamStatus } from "./map-upstream-status.ts";
import { parseRetryAfter } from "./parse-retry-after.ts";
import { isJsonType, readContentEncoding, readMediaType } from "./read-content-headers.ts";
import { readErrorBody, type UpstreamErrorBody } from "./read-error-body.ts";
import { dropCutSecret, redactUpstreamText } from "./redact-upstream-text.ts";
import { startUpstreamCall, type UpstreamCall } from "./start-upstream-call.ts";
import { createEndpointFailure, createFinalFailure, type UpstreamFailure } from "./upstream-failure.ts";
import type { UpstreamSettings } from "./upstream-settings.ts";

/** What every attempt of one engine shares. */
export interface AttemptContext {
  /** The catalogue id, for messages and logs. */
  modelId: string;
  /**
   * The upstream request body as JSON text for an endpoint, by what it takes: with or without
   * `stream_options`, the completion bound as `max_tokens` or as `max_completion_tokens` (see
   * {@link UpstreamEndpoint}). The same text on every attempt to endpoints that take the same.
   */
  body: (takes: { streamOptions: boolean; maxTokens: boolean }) => string;
  /** Whether the body bounds the completion (as `max_tokens` where the endpoint takes it). */
  boundsCompletion: boolean;
  /** The estimated prompt tokens, used where the upstream reports none. */
  promptTokens: number;
  settings: UpstreamSettings;
  /** The client's signal: aborting ends the attempt with a `finish` that counts what was generated. */
  signal: AbortSignal;
  /** The engine's: aborted when it closes. */
  closeSignal: AbortSignal;
  balancer: EndpointBalancer<UpstreamEndpoint>;
  watchdog: StallWatchdog;
  /** The engine's calls in flight, aborted when it closes. */
  inFlight: Set<UpstreamCall>;
  logger: EngineLogger;
}

/** The parts an attempt produced from what arrived, or why it produced nothing. */
export type AttemptBatch =
  | { kind: "parts"; parts: StreamPart[] /** The batch ends with `finish` or `error`. */; last: boolean }
  | { kind: "failed"; failure: UpstreamFailure };

/** One request on one endpoint, read batch by batch. */
export interface UpstreamAttempt {
  /**
   * The parts made from the next data (at least one), or the failure while nothing was produced
   * (the caller may retry). After a batch with `last`, the attempt is over and cleaned up.
   */
  next(): Promise<AttemptBatch>;
  /** Stops an attempt whose reader gave up before its last batch. */
  dispose(): void;
  /** When it started, on the balancer's clock: a failure is reported with it. */
  readonly startedAt: number;
}

/** Longest upstream error body read, in bytes of text: enough for any message, bounded against abuse. */
const MAX_ERROR_BODY_LENGTH = 64 * 1024;
/**
 * Longest answer read, in characters: a whole JSON answer (an upstream that ignored `stream`),
 * one SSE event, or the text and tool arguments of a streamed answer. Far above any completion;
 * an upstream that never ends its line, its event or its answer is cut here instead of being read
 * into memory until the process runs out.
 */
export const MAX_ANSWER_LENGTH = 32 * 1024 * 1024;
const MAX_ANSWER_TEXT = `${MAX_ANSWER_LENGTH / (1024 * 1024)} MiB`;

/** Statuses about the endpoint's account, whose error body a log line quotes (see quoteBody). */
const ACCOUNT_STATUSES = new Set([401, 402, 403, 404, 429]);

/** The type and code of an upstream error, for a log line that quotes none of its text. */
function describeErrorKind(body: UpstreamErrorBody): string | undefined {
  const fields = [
    body.type === undefined ? undefined : `type ${body.type}`,
    body.code === undefined ? undefined : `code ${body.code}`,
  ].filter((field) => field !== undefined);
  return fields.length === 0 ? undefined : fields.join(", ");
}

/** Longest upstream error body quoted in a log line, in characters. */
const MAX_LOGGED_BODY_LENGTH = 500;

/** Longest upstream header value (a content type or encoding) repeated in a message. */
const MAX_HEADER_LENGTH = 40;

/** How long the rest of a body after `[DONE]` may take before its connection is dropped. */
const DRAIN_AFTER_END_MS = 1_000;
/**
 * Longest silence after the finish reason: only the usage chunk and `[DONE]` are left, which
 * servers send at once. An upstream that holds the stream open there ends the answer after this
 * instead of the idle timeout (the usage is then estimated).
 */
const FINISH_GRACE_MS = 1_000;

/** Why a call was aborted: the client left, the engine closed, or the upstream stalled. */
class AttemptStopped extends Error {}

/**
 * Sends the request to `endpoint` and turns its SSE answer into parts: each event parsed as JSON
 * and mapped (create-chunk-mapper.ts), the body read to its end after `[DONE]` so the connection
 * is reused, usage taken from the upstream or estimated. A failure before any part is returned
 * for the caller to retry; after one, it becomes the last batch's `error` part.
 */
export function startUpstreamAttempt(endpoint: UpstreamEndpoint, context: AttemptContext): UpstreamAttempt {
  const { signal, closeSignal, settings, modelId } = context;
  const startedAt = context.balancer.clock();
  let call: UpstreamCall | undefined;
  const watch = context.watchdog.watch(() => call?.abort(new AttemptStopped("stalled")));
  // The first-byte wait begins when the request goes out on a connection: time queued for one
  // (`max_connections`) is Tollgate's own, and must neither time out as the upstream's silence
  // nor rest an endpoint that was only busy.
  watch.setWaiting(false);
  // Until then, an endpoint that begins to rest (a hung one, say) sends it elsewhere: otherwise
  // it would still go out when a connection frees, and wait there for its own timeout.
  let requeued = false;
  const requeue = () => {
    requeued = call?.abort(new AttemptStopped("requeued")) === true;
  };
  endpoint.unsent.add(requeue);
  const sentStreamOptions = endpoint.takesStreamOptions;
  const sentMaxTokens = context.boundsCompletion && endpoint.takesMaxTokens;
  call = startUpstreamCall({
    pool: endpoint.pool,
    path: endpoint.path,
    headers: endpoint.headers,
    body: context.body({ streamOptions: sentStreamOptions, maxTokens: endpoint.takesMaxTokens }),
    onWaiting: (waiting) => watch.setWaiting(waiting),
    onStarted: () => {
      endpoint.unsent.delete(requeue);
      watch.setWaiting(true);
    },
    slots: endpoint.slots,
  });
  const current = call;
  context.inFlight.add(current);
  const onAbort = () => current.abort(new AttemptStopped("aborted"));
  signal.addEventListener("abort", onAbort);

  const parser = createSseParser();
  const mapper = createChunkMapper(endpoint.secrets, endpoint.names);
  /** `json`: the upstream ignored `stream` and answers with one `chat.completion` object. */
  let stage: "response" | "body" | "json" | "over" = "response";
  /**
   * What the reader takes is the upstream's activity: each piece of an error body or a JSON
   * answer, and of an event stream only what parses as events (below): comments alone
   * (`: PROCESSING`, sent by some servers while they queue) would keep a hung upstream's request
   * waiting for ever.
   */
  const touch = () => watch.touch();
  let produced = false;
  let done = false;
  /**
   * Set while waiting for the upstream: what is thrown then is the upstream's (or the network's)
   * doing; what is thrown otherwise is a fault in Tollgate's own reading of the answer.
   */
  let awaitingUpstream = false;
  let streamError: UpstreamErrorBody | undefined;
  /**
   * The body's text while it has held no event: an upstream that answers an event stream with
   * bare JSON (an error, or a whole completion) is read as such. Kept up to the error body's
   * bound, and past it only while it begins as JSON does, up to a whole answer's: a completion
   * dropped there would be retried, each retry a generation paid for upstream.
   */
  let unparsed: string | undefined = "";
  /** The response's content type when it is neither an event stream nor JSON. */
  let unexpectedType: string | undefined;
  /** Events read as chunks (not `[DONE]`, not errors): whether the upstream sent any. */
  let chunksRead = 0;
  /** The answer was one JSON object (see `whole` in readEvent); `notCompletion`: one without `choices`. */
  let wholeAnswer = false;
  let notCompletion = false;

  /**
   * The answer came whole: only then does the endpoint count as working. A 2xx alone says little:
   * an endpoint that answers 200 and then breaks every stream would have each failure follow a
   * success and never rest. An answer that ends otherwise (the client left, the engine closed,
   * an error the upstream sent, a fault in Tollgate) is neither success nor failure.
   */
  const reportSuccess = () => context.balancer.reportSuccess(endpoint, { startedAt });

  const finishUp = () => {
    stage = "over";
    endpoint.unsent.delete(requeue);
    watch.stop();
    signal.removeEventListener("abort", onAbort);
    context.inFlight.delete(current);
  };

  /** Reads one event; `whole`: the data is a whole `chat.completion` (see convert-completion-to-chunk.ts). */
  const readEvent = (event: ServerSentEvent, parts: StreamPart[], whole = false) => {
    if (event.data === "[DONE]") {
      done = true;
      return;
    }
    const isError = event.event === "error";
    if (event.data === "" && !isError) return;
    let chunk: unknown;
    try {
      chunk = JSON.parse(event.data);
    } catch {
      // An error event's text is its message.
      streamError = isError
        ? readErrorBody(event.data, endpoint.secrets, { names: endpoint.names })
        : malformed(whole ? "an answer that is not JSON" : "an event that is not JSON");
      return;
    }
    if (!whole) {
      streamError = mapper.read(chunk, parts, event.event);
      if (streamError === undefined) chunksRead++;
      return;
    }
    wholeAnswer = true;
    streamError = mapper.read(convertCompletionToChunk(chunk), parts);
    if (streamError !== undefined) return;
    // A completion is complete in itself; anything else (no choices) is no answer.
    if (Array.isArray((chunk as { choices?: unknown } | null)?.choices)) done = true;
    else notCompletion = true;
  };

  /**
   * The upstream said it was done without any answer: a `[DONE]` before any chunk at all, or a
   * whole JSON answer with no text, reasoning, call or finish reason. That is no empty completion
   * but a broken upstream, and fails like one that closed the stream before sending anything.
   * Chunks that carry no finish reason are taken for an empty answer: some upstreams never send
   * one (Gemini proxies send null throughout, older Ollama "").
   */
  const answeredNothing = (hasParts: boolean): boolean =>
    (wholeAnswer || chunksRead === 0) &&
    !hasParts &&
    mapper.producedLength === 0 &&
    !mapper.calledTools &&
    mapper.rawFinishReason === undefined;

  /** What an upstream that sent no answer before its body ended (or its `[DONE]`) did. */
  const describeNothing = (): string => {
    if (notCompletion) return "answered with JSON that is not a chat completion";
    if (wholeAnswer)
      return "answered with a chat completion that holds no answer (no content and no finish_reason)";
    if (unexpectedType !== undefined && chunksRead === 0)
      return `answered with ${quoteHeader(unexpectedType, endpoint)} instead of an event stream`;
    const ended = done ? "ended the stream ([DONE])" : "closed the stream";
    return chunksRead === 0
      ? done
        ? `${ended} without sending any chunk`
        : `${ended} before sending anything`
      : `${ended} after chunks that hold no answer (no content and no finish_reason)`;
  };

  /** The last batch or the failure, once the body ended (`error` undefined) or broke. */
  const conclude = (parts: StreamPart[], error: unknown): AttemptBatch => {
    const hasParts = produced || parts.length > 0;
    // An upstream that gave up mid-answer and said so in its finish reason (vLLM's `abort`,
    // OpenRouter's `error`) broke the answer, as an error event does, whatever came after.
    const failedReason = isFailureFinishReason(mapper.rawFinishReason);
    if (failedReason && streamError === undefined)
      streamError = malformed(`finish_reason "${mapper.rawFinishReason}"`);
    let final: StreamPart | undefined;
    let failure: UpstreamFailure | undefined;
    if (done && streamError === undefined && !answeredNothing(hasParts)) {
      final = finish(mapper, parts, context.promptTokens);
      reportSuccess();
    } else if (signal.aborted) {
      // A client that left after the model's finish reason (waiting for the usage) left a
      // finished answer: its reason stands, as on a local model.
      final = finish(
        mapper,
        parts,
        context.promptTokens,
        mapper.rawFinishReason === undefined || failedReason ? "abort" : undefined,
      );
    } else if (closeSignal.aborted) {
      const closing = closingError(modelId);
      if (hasParts)
        final = { type: "error", error: closing, usage: usageSoFar(mapper, context.promptTokens, false) };
      else
        failure = {
          ...createEndpointFailure({ modelId, summary: "" }),
          retryable: false,
          fallback: false,
          error: closing,
        };
    } else if (requeued) {
      const summary = "began to rest before the request was sent";
      failure = { ...createEndpointFailure({ modelId, summary, endpointFault: false }), requeued: true };
    } else if (streamError !== undefined) {
      const said = streamError.message ?? streamError.unreadable;
      const summary = `sent an error${said === undefined ? "" : ` (${said})`}`;
      if (hasParts) final = midStreamError(summary, parts);
      else
        failure = mapStreamError({ body: streamError, summary, modelId, sentStreamOptions, sentMaxTokens });
    } else if (mapper.rawFinishReason !== undefined) {
      // Ended (or broke) after its finish reason, without [DONE]: the answer is complete; only
      // the usage chunk may be missing, and is then estimated.
      final = finish(mapper, parts, context.promptTokens);
      reportSuccess();
    } else {
      const summary =
        error === undefined
          ? hasParts
            ? "closed the stream before the answer was complete"
            : describeNothing()
          : watch.stalled !== undefined
            ? describeStall(watch.stalled, settings)
            : describeTransportError(error);
      if (hasParts) {
        context.balancer.reportFailure(endpoint, { endpointFault: true, retryAfterMs: undefined, startedAt });
        final = midStreamError(summary, parts);
      } else {
        // An answer that is not HTTP would come the same way again from that endpoint.
        const retrySameEndpoint = error === undefined || !isProtocolFault(error);
        failure = createEndpointFailure({ modelId, summary, retrySameEndpoint });
      }
    }
    finishUp();
    if (final === undefined)
      return { kind: "failed", failure: failure ?? createEndpointFailure({ modelId, summary: "failed" }) };
    parts.push(final);
    return { kind: "parts", parts, last: true };
  };

  /**
   * A fault in Tollgate's own code while reading the answer: a 500, logged with its stack, not
   * retried and not held against the endpoint, which did nothing wrong as far as anyone knows.
   */
  const failInternally = (parts: StreamPart[], error: unknown): AttemptBatch => {
    context.logger.error(
      { err: error, model: modelId, endpoint: endpoint.label },
      "reading an upstream answer failed in Tollgate",
    );
    finishUp();
    current.abort(new AttemptStopped("internal error"));
    const internal = new AppError(
      "internal_error",
      `The server had an error while reading the answer of the model '${modelId}'. Please retry.`,
      { cause: error },
    );
    if (!produced && parts.length === 0)
      return { kind: "failed", failure: createFinalFailure("failed in Tollgate", internal) };
    let usage: Usage;
    try {
      usage = usageSoFar(mapper, context.promptTokens, false);
    } catch {
      usage = { promptTokens: context.promptTokens, completionTokens: 0, estimated: true };
    }
    return { kind: "parts", parts: [...parts, { type: "error", error: internal, usage }], last: true };
  };

  const midStreamError = (summary: string, parts: StreamPart[]): StreamPart => {
    mapper.flush(parts);
    context.logger.warn(
      { model: modelId, endpoint: endpoint.label, failure: summary },
      "upstream stream failed after it started",
    );
    return {
      type: "error",
      error: new AppError(
        "upstream_unavailable",
        `The upstream server of the model '${modelId}' ${summary}; the answer is incomplete. Please retry.`,
      ),
      usage: usageSoFar(mapper, context.promptTokens, false),
    };
  };

  return {
    startedAt,
    async next() {
      const parts: StreamPart[] = [];
      if (stage === "over") throw new Error("the attempt is over");
      try {
        if (stage === "response") {
          awaitingUpstream = true;
          const response = await current.response;
          awaitingUpstream = false;
          const encoding = readContentEncoding(response.headers["content-encoding"]);
          if (response.statusCode < 200 || response.statusCode >= 300) {
            let body = { text: "", cut: false };
            if (encoding === undefined) {
              awaitingUpstream = true;
              body = await readErrorText(current, endpoint.secrets, touch);
              awaitingUpstream = false;
            } else {
              // A compressed error body would read as noise: its status says enough.
              current.drain(DRAIN_AFTER_END_MS);
            }
            finishUp();
            const read = readErrorBody(body.text, endpoint.secrets, { cut: body.cut, names: endpoint.names });
            const failure = mapUpstreamStatus({
              status: response.statusCode,
              body: read,
              retryAfterMs: parseRetryAfter(response.headers),
              modelId,
              sentStreamOptions,
              sentMaxTokens,
            });
            // Quoted for the operator where the endpoint failed. A refusal of the request itself
            // (400, 413, 422) is the client's to read, and its body may repeat the prompt
            // (FastAPI's validation errors do), which no log line holds. Nor does a server error's
            // body in full (a 500 may quote the prompt or the answer: "error parsing tool call:
            // raw='...'"): its type and code tell the operator enough; the whole body only for
            // the statuses about the endpoint's account (401, 402, 403, 404, 429).
            if (!failure.fallback) return { kind: "failed", failure };
            const upstreamBody = ACCOUNT_STATUSES.has(response.statusCode)
              ? quoteBody(body, endpoint.secrets)
              : describeErrorKind(read);
            return { kind: "failed", failure: { ...failure, upstreamBody } };
          }
          if (encoding !== undefined) {
            finishUp();
            current.abort(new AttemptStopped("compressed body"));
            return {
              kind: "failed",
              failure: compressedAnswerFailure(modelId, quoteHeader(encoding, endpoint)),
            };
          }
          const contentType = readMediaType(response.headers["content-type"]);
          stage = contentType !== undefined && isJsonType(contentType) ? "json" : "body";
          // Read all the same (some servers label streams loosely), but named if nothing came of it.
          if (stage === "body" && contentType !== undefined && contentType !== "text/event-stream")
            unexpectedType = contentType;
        }
        if (stage === "json") {
          awaitingUpstream = true;
          const answer = await readText(current, MAX_ANSWER_LENGTH, touch);
          awaitingUpstream = false;
          if (answer.cut) {
            streamError = malformed(`an answer longer than ${MAX_ANSWER_TEXT}`);
          } else {
            readEvent({ event: undefined, data: answer.text }, parts, true);
          }
          return conclude(parts, undefined);
        }
        for (;;) {
          awaitingUpstream = true;
          const text = await current.read();
          awaitingUpstream = false;
          if (text === undefined) break;
          const pendingBefore = parser.pendingLength;
          const events = parser.push(text);
          if (events.length > 0 || parser.pendingLength > pendingBefore) touch();
          if (unparsed !== undefined)
            unparsed = events.length === 0 ? keepUnparsed(unparsed, text) : undefined;
          for (const event of events) {
            readEvent(event, parts);
            if (done || streamError !== undefined) break;
          }
          if (done || streamError !== undefined) {
            // The answer is over ([DONE] or an error event): the rest of the body is only read
            // so that the connection is reused, and not waited for.
            current.drain(DRAIN_AFTER_END_MS);
            break;
          }
          // A body that has held no event yet is a bare answer, however the parser holds it.
          const tooLong =
            mapper.producedLength > MAX_ANSWER_LENGTH || (unparsed?.length ?? 0) > MAX_ANSWER_LENGTH
              ? "an answer"
              : parser.pendingLength > MAX_ANSWER_LENGTH
                ? "an event"
                : undefined;
          if (tooLong !== undefined) {
            streamError = malformed(`${tooLong} longer than ${MAX_ANSWER_TEXT}`);
            // Nothing after it is read: the connection goes, the next read throws.
            current.abort(new AttemptStopped("answer too long"));
          }
          if (mapper.rawFinishReason !== undefined) watch.shortenIdle(FINISH_GRACE_MS);
          if (parts.length > 0 && streamError === undefined) {
            produced = true;
            return { kind: "parts", parts, last: false };
          }
        }
        if (!done && streamError === undefined) {
          const last = parser.end();
          if (last !== undefined) {
            // After the model's finish reason, an event the body ended inside of was cut on its
            // way (most often the usage chunk): dropped, as the SSE standard drops an event the
            // stream ended in; the answer is whole, its usage estimated (conclude).
            if (mapper.rawFinishReason === undefined || !isCutEvent(last)) readEvent(last, parts);
          } else if (unparsed !== undefined && beginsAsJson(unparsed))
            readEvent({ event: undefined, data: unparsed }, parts, true);
        }
        return conclude(parts, undefined);
      } catch (error) {
        return awaitingUpstream ? conclude(parts, error) : failInternally(parts, error);
      }
    },
    dispose() {
      if (stage === "over") return;
      finishUp();
      current.abort(new AttemptStopped("disposed"));
    },
  };
}

/**
 * The body's text so far with `text` added, while it may still be a bare JSON answer: to the
 * error body's bound whatever it holds, and past it only if it begins with `{` (then bounded with
 * the answers, in the caller). `undefined` once it is neither.
 */
function keepUnparsed(unparsed: string, text: string): string | undefined {
  const kept = unparsed + text;
  if (kept.length <= MAX_ERROR_BODY_LENGTH) return kept;
  // Looked at once, where it grows past the bound: what is kept after that began as JSON.
  if (unparsed.length <= MAX_ERROR_BODY_LENGTH && !beginsAsJson(kept)) return undefined;
  return kept;
}

/** Whether an event the body ended in is a piece of one: data that is neither JSON nor `[DONE]`. */
function isCutEvent(event: ServerSentEvent): boolean {
  if (event.event === "error" || event.data === "[DONE]") return false;
  try {
    JSON.parse(event.data);
    return false;
  } catch {
    return true;
  }
}

/** Whether a body begins as a JSON object does, after white space (a byte order mark included). */
function beginsAsJson(text: string): boolean {
  return text.trimStart().startsWith("{");
}

function finish(
  mapper: ChunkMapper,
  parts: StreamPart[],
  promptTokens: number,
  abortReason?: "abort",
): StreamPart {
  mapper.flush(parts);
  // An answer the client left before its end is incomplete; any other that reaches here ended.
  const usage = usageSoFar(mapper, promptTokens, abortReason === undefined);
  if (abortReason !== undefined) return { type: "finish", reason: "stop", rawReason: abortReason, usage };
  return {
    type: "finish",
    reason: mapFinishReason(mapper.rawFinishReason, { calledTools: mapper.calledTools }),
    rawReason: mapper.rawFinishReason,
    usage,
  };
}

/**
 * The usage to charge. An answer that `ended` (its finish reason or `[DONE]` came) with a usage
 * report after its last output is charged as the upstream reported it, counts it left out
 * estimated. Any other (cut, failed, left by its client, or with output after its last report)
 * may have produced more than the upstream counted when it last reported: its completion is the
 * larger of the reported count and the estimate of what was produced. A prompt reported as 0, and
 * a completion reported as 0 after text, are placeholders (servers that send zeros on every chunk)
 * and estimated, even in a final report. `estimated` whenever an estimate is used.
 */
function usageSoFar(mapper: ChunkMapper, promptTokens: number, ended: boolean): Usage {
  const reported = mapper.reportedUsage;
  const final = ended && mapper.usageCoversOutput;
  // Zeros are placeholders wherever they come, the final report included (servers that never
  // count send them on every chunk): no chat prompt has no token, and text that came has some.
  const reportedPrompt = reported?.promptTokens === 0 ? undefined : reported?.promptTokens;
  const reportedCompletion =
    reported?.completionTokens === 0 && mapper.producedLength > 0 ? undefined : reported?.completionTokens;
  // The common case, a final report of both counts, estimates nothing.
  if (final && reportedPrompt !== undefined && reportedCompletion !== undefined && reported !== undefined)
    return reported;
  const producedTokens = mapper.estimateCompletionTokens();
  const completionTokens =
    reportedCompletion === undefined || (!final && producedTokens > reportedCompletion)
      ? producedTokens
      : reportedCompletion;
  const usage: Usage = { promptTokens: reportedPrompt ?? promptTokens, completionTokens };
  if (reportedPrompt === undefined || completionTokens !== reportedCompletion || reported?.estimated === true)
    usage.estimated = true;
  return usage;
}

/** What an upstream that broke the protocol sent, as {@link readEvent} reports an upstream's error. */
function malformed(message: string): UpstreamErrorBody {
  return { message, type: undefined, code: undefined, param: undefined };
}

function describeStall(kind: StallKind, settings: UpstreamSettings): string {
  return kind === "first-byte"
    ? `did not answer within ${formatDuration(settings.firstByteTimeoutMs)}`
    : `sent nothing for ${formatDuration(settings.idleTimeoutMs)}`;
}

function formatDuration(milliseconds: number): string {
  return milliseconds < 1000 ? `${milliseconds} ms` : `${Math.round(milliseconds / 100) / 10} s`;
}

/** `model_unavailable`: the engine closed (shutdown or reload) while the request ran. */
export function closingError(modelId: string): AppError {
  return new AppError(
    "model_unavailable",
    `The model '${modelId}' was unloaded while the request ran (the server is shutting down or reloading). Please retry.`,
    { retryAfterSeconds: 1 },
  );
}

/** The error body, up to its bound; where cut there, without the start of a secret it may end in. */
async function readErrorText(
  call: UpstreamCall,
  secrets: readonly string[],
  onPiece: () => void,
): Promise<{ text: string; cut: boolean }> {
  const { text, cut } = await readText(call, MAX_ERROR_BODY_LENGTH, onPiece);
  return { text: cut ? dropCutSecret(text, secrets) : text, cut };
}

/**
 * An error body as the operator's log line quotes it (see `upstreamBody` in upstream-failure.ts):
 * without the endpoint's secrets or what is shaped like a credential (redacted on the whole text,
 * then cut), on one line, at most {@link MAX_LOGGED_BODY_LENGTH} characters; `undefined` when empty.
 */
function quoteBody(body: { text: string; cut: boolean }, secrets: readonly string[]): string | undefined {
  const text = redactUpstreamText(body.text, secrets).replace(/\s+/g, " ").trim();
  if (text === "") return undefined;
  return text.length <= MAX_LOGGED_BODY_LENGTH && !body.cut
    ? text
    : `${cutText(text, MAX_LOGGED_BODY_LENGTH - 1)}…`;
}

/**
 * An upstream's header value as a message repeats it: without the endpoint's secrets and names,
 * then cut short (cut first, a secret could be cut and its start left).
 */
function quoteHeader(value: string, endpoint: UpstreamEndpoint): string {
  const redacted = redactUpstreamText(value, endpoint.secrets, endpoint.names);
  return redacted.length <= MAX_HEADER_LENGTH ? redacted : `${redacted.slice(0, MAX_HEADER_LENGTH - 1)}…`;
}

/**
 * The body as text, up to `maxLength`: past that the call is aborted and the text cut there.
 * `onPiece` runs for each piece taken.
 */
async function readText(
  call: UpstreamCall,
  maxLength: number,
  onPiece: () => void,
): Promise<{ text: string; cut: boolean }> {
  let text = "";
  for (let piece = await call.read(); piece !== undefined; piece = await call.read()) {
    onPiece();
    text += piece;
    if (text.length > maxLength) {
      call.abort(new AttemptStopped("body too long"));
      return { text: text.slice(0, maxLength), cut: true };
    }
  }
  return { text, cut: false };
}

/**
 * An answer compressed although Tollgate asked for `accept-encoding: identity` (a server or a
 * proxy that ignores it): it cannot be read. The endpoint is at fault and will answer the same
 * again, so other endpoints and the fallbacks are tried, not this one, and it rests.
 */
function compressedAnswerFailure(modelId: string, encoding: string): UpstreamFailure {
  return createEndpointFailure({
    modelId,
    summary: `answered with Content-Encoding ${encoding}, which Tollgate does not decode`,
    retrySameEndpoint: false,
  });
}
