import { AppError } from "../../errors/app-error.ts";
import type { StreamPart, UpstreamAttemptOutcome, Usage } from "../engine.ts";
import { isPastBounds } from "./bound-usage.ts";
import { createAnswerReader } from "./create-answer-reader.ts";
import { createChunkMapper } from "./create-chunk-mapper.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { describeTransportError, isConnectTimeout, isProtocolFault } from "./describe-transport-error.ts";
import {
  compressedAnswerFailure,
  describeNothing,
  describeStall,
  describeStreamError,
  quoteHeader,
} from "./describe-upstream-fault.ts";
import { finishAnswer, midStreamError, usageSoFar } from "./finish-upstream-answer.ts";
import { isFailureFinishReason } from "./map-finish-reason.ts";
import { mapStreamError } from "./map-stream-error.ts";
import { isJsonType, readContentEncoding, readMediaType } from "./read-content-headers.ts";
import { mapErrorAnswer, readErrorText } from "./read-error-answer.ts";
import { MAX_ANSWER_LENGTH, MAX_ANSWER_TEXT, readText } from "./read-upstream-body.ts";
import { startUpstreamCall, type UpstreamCall } from "./start-upstream-call.ts";
import {
  type AttemptBatch,
  type AttemptContext,
  AttemptStopped,
  type UpstreamAttempt,
} from "./upstream-attempt.ts";
import { createEndpointFailure, createFinalFailure, type UpstreamFailure } from "./upstream-failure.ts";

/**
 * What one attempt leaves out that its endpoint otherwise takes: `stream_options`, and
 * `max_tokens` (the bound then goes as `max_completion_tokens`). An attempt after a 400 that
 * named the field tries without it; only its success tells that the endpoint refuses it.
 */
export interface LeftOutFields {
  streamOptions: boolean;
  maxTokens: boolean;
}

const NOTHING_LEFT_OUT: LeftOutFields = { streamOptions: false, maxTokens: false };

/** How long the rest of a body after `[DONE]` may take before its connection is dropped. */
const DRAIN_AFTER_END_MS = 1_000;
/**
 * Longest silence after the finish reason: only the usage chunk and `[DONE]` are left, which
 * servers send at once. An upstream that holds the stream open there ends the answer after this
 * instead of the idle timeout (the usage is then estimated).
 */
const FINISH_GRACE_MS = 1_000;

/**
 * Sends the request to `endpoint` and turns its SSE answer into parts: each event parsed as JSON
 * and mapped (create-answer-reader.ts, create-chunk-mapper.ts), the body read to its end after
 * `[DONE]` so the connection is reused, usage taken from the upstream or estimated. A failure
 * before any part is returned for the caller to retry; after one, it becomes the last batch's
 * `error` part.
 */
export function startUpstreamAttempt(
  endpoint: UpstreamEndpoint,
  context: AttemptContext,
  leaveOut: LeftOutFields = NOTHING_LEFT_OUT,
): UpstreamAttempt {
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
  const sentStreamOptions = endpoint.takesStreamOptions && !leaveOut.streamOptions;
  const takesMaxTokens = endpoint.takesMaxTokens && !leaveOut.maxTokens;
  const sentMaxTokens = context.usageBounds.completionSent && takesMaxTokens;
  call = startUpstreamCall({
    pool: endpoint.pool,
    path: endpoint.path,
    headers: endpoint.headers,
    body: context.body({ streamOptions: sentStreamOptions, maxTokens: takesMaxTokens }),
    onWaiting: (waiting) => watch.setWaiting(waiting),
    onStarted: () => {
      endpoint.unsent.delete(requeue);
      watch.setWaiting(true);
    },
    slots: endpoint.slots,
    tenant: context.tenant,
  });
  const current = call;
  context.inFlight.add(current);
  const onAbort = () => current.abort(new AttemptStopped("aborted"));
  signal.addEventListener("abort", onAbort);

  const mapper = createChunkMapper(
    endpoint.secrets,
    endpoint.names,
    context.usageBounds,
    context.logprobs === true,
  );
  /** `json`: the upstream ignored `stream` and answers with one `chat.completion` object. */
  let stage: "response" | "body" | "json" | "over" = "response";
  /**
   * The upstream's activity, for the stall watchdog: each piece of an error body or a JSON
   * answer, and of an event stream only what parses as events (create-answer-reader.ts).
   */
  const touch = () => watch.touch();
  const reader = createAnswerReader(mapper, endpoint, touch);
  let produced = false;
  /**
   * Set while waiting for the upstream: what is thrown then is the upstream's (or the network's)
   * doing; what is thrown otherwise is a fault in Tollgate's own reading of the answer.
   */
  let awaitingUpstream = false;
  /** The answer's HTTP status, once it came. */
  let status: number | undefined;

  /**
   * The answer came whole: only then does the endpoint count as working. A 2xx alone says little:
   * an endpoint that answers 200 and then breaks every stream would have each failure follow a
   * success and never rest. An answer that ends otherwise (the client left, the engine closed,
   * an error the upstream sent, a fault in Tollgate) is neither success nor failure.
   */
  const reportSuccess = () => context.balancer.reportSuccess(endpoint, { startedAt });

  /** Ends the attempt, counted with its outcome (none for one never sent). */
  const finishUp = (outcome: UpstreamAttemptOutcome | undefined) => {
    stage = "over";
    endpoint.unsent.delete(requeue);
    watch.stop();
    signal.removeEventListener("abort", onAbort);
    context.inFlight.delete(current);
    if (outcome !== undefined) context.countAttempt?.(endpoint, outcome);
  };

  /** The last batch or the failure, once the body ended (`error` undefined) or broke. */
  const conclude = (parts: StreamPart[], error: unknown): AttemptBatch => {
    const hasParts = produced || parts.length > 0;
    // An upstream that gave up mid-answer and said so in its finish reason (vLLM's `abort`,
    // OpenRouter's `error`) broke the answer, as an error event does, whatever came after.
    const failedReason = isFailureFinishReason(mapper.rawFinishReason);
    if (failedReason && reader.streamError === undefined)
      reader.fail(`finish_reason "${mapper.rawFinishReason}"`);
    const { done, streamError } = reader;
    let final: StreamPart | undefined;
    let failure: UpstreamFailure | undefined;
    /** For `/metrics`: `cancelled` unless a branch below says otherwise (the client left, the engine closed). */
    let outcome: UpstreamAttemptOutcome = "cancelled";
    if (done && streamError === undefined && !reader.answeredNothing(hasParts)) {
      final = finishAnswer(mapper, parts, context.promptTokens);
      reportSuccess();
      outcome = "ok";
    } else if (signal.aborted) {
      // A client that left after the model's finish reason (waiting for the usage) left a
      // finished answer: its reason stands, as on a local model.
      final = finishAnswer(
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
      outcome = "stream_error";
      // The client hears the upstream's message; log lines never hold it (it may quote the prompt).
      const { summary, shownSummary, upstreamBody } = describeStreamError(streamError);
      if (hasParts)
        final = midStreamError({ summary, shownSummary, upstreamBody }, parts, mapper, context, endpoint);
      else
        failure = mapStreamError({
          body: streamError,
          summary,
          shownSummary,
          modelId,
          sentStreamOptions,
          sentMaxTokens,
        });
    } else if (mapper.rawFinishReason !== undefined) {
      // Ended (or broke) after its finish reason, without [DONE]: the answer is complete; only
      // the usage chunk may be missing, and is then estimated.
      final = finishAnswer(mapper, parts, context.promptTokens);
      reportSuccess();
      outcome = "ok";
    } else {
      outcome =
        error === undefined
          ? "stream_error"
          : watch.stalled !== undefined || isConnectTimeout(error)
            ? "timeout"
            : brokenAfterStatus(status);
      const summary =
        error === undefined
          ? hasParts
            ? "closed the stream before the answer was complete"
            : describeNothing(reader, endpoint)
          : watch.stalled !== undefined
            ? describeStall(watch.stalled, settings)
            : describeTransportError(error);
      if (hasParts) {
        context.balancer.reportFailure(endpoint, { endpointFault: true, retryAfterMs: undefined, startedAt });
        final = midStreamError({ summary }, parts, mapper, context, endpoint);
      } else {
        // An answer that is not HTTP would come the same way again from that endpoint; so would,
        // likely, the silence of one that stalled (a queue too long), which each try would also
        // load with another copy of the request: others are tried, not it (a fuzzed stall held
        // the client three timeouts, 185 s, told "did not answer within 60 s").
        const retrySameEndpoint =
          watch.stalled === undefined && (error === undefined || !isProtocolFault(error));
        failure = createEndpointFailure({ modelId, summary, retrySameEndpoint });
        if (error !== undefined && watch.stalled === undefined && current.closedWhileIdle())
          failure.closedWhileIdle = true;
      }
    }
    finishUp(requeued ? undefined : outcome);
    if (mapper.usageBeyondBounds !== undefined) {
      context.logger.warn(
        {
          model: modelId,
          endpoint: endpoint.label,
          reported: mapper.usageBeyondBounds,
          bounds: context.usageBounds,
        },
        "the upstream reported more tokens than the request can have used; charged at the bound",
      );
    }
    if (final === undefined) {
      const failed = failure ?? createEndpointFailure({ modelId, summary: "failed" });
      // What it generated all the same (its reasoning): the usage row records it, uncharged.
      if (mapper.producedLength > 0)
        failed.generatedTokens = usageSoFar(mapper, context.promptTokens, false).completionTokens;
      return { kind: "failed", failure: failed };
    }
    parts.push(final);
    return { kind: "parts", parts, last: true };
  };

  /**
   * Ends an answer that went past its bounds (isPastBounds: the `max_tokens` it was sent, the
   * model's context), as one that honoured them ends (`length`), charged no more than they allow
   * (see UsageBounds); the rest is not read. An upstream that ignored the bound streamed 67 MB for
   * `max_tokens: 10`, passed on to the client up to the 32 MiB cap.
   */
  const endPastBound = (parts: StreamPart[]): AttemptBatch => {
    const { completionSent, completionTokens, contextTokens } = context.usageBounds;
    context.logger.warn(
      {
        model: modelId,
        endpoint: endpoint.label,
        ...(completionSent ? { maxTokens: completionTokens } : {}),
        contextTokens,
      },
      "the upstream's answer went on past the max_tokens it was sent or the model's context; it was ended there",
    );
    parts.push(finishAnswer(mapper, parts, context.promptTokens, "length"));
    reportSuccess();
    finishUp("ok");
    current.abort(new AttemptStopped("past max_tokens"));
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
    // What the upstream sent was not an answer Tollgate could read, as far as the count goes.
    finishUp("stream_error");
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
          status = response.statusCode;
          // With `log_level: debug`, which endpoint answered each attempt, how, and how soon.
          if (context.logger.isLevelEnabled?.("debug") === true) {
            context.logger.debug?.(
              {
                model: modelId,
                endpoint: endpoint.label,
                status,
                contentType: response.headers["content-type"],
                headersMs: Math.round(context.balancer.clock() - startedAt),
              },
              "upstream answered",
            );
          }
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
            finishUp("http_error");
            const failure = mapErrorAnswer({
              response,
              body,
              endpoint,
              modelId,
              sentStreamOptions,
              sentMaxTokens,
            });
            return { kind: "failed", failure };
          }
          if (encoding !== undefined) {
            finishUp("stream_error");
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
            reader.unexpectedType = contentType;
        }
        if (stage === "json") {
          awaitingUpstream = true;
          const answer = await readText(current, MAX_ANSWER_LENGTH, touch);
          awaitingUpstream = false;
          if (answer.cut) reader.fail(`an answer longer than ${MAX_ANSWER_TEXT}`);
          else if (looksLikeEventStream(answer.text)) {
            // An event stream labelled JSON (the openai SDK reads one so too): read as one, whole.
            reader.push(answer.text, parts);
            reader.end(parts);
          } else reader.readWhole(answer.text, parts);
          return conclude(parts, undefined);
        }
        for (;;) {
          awaitingUpstream = true;
          const text = await current.read();
          awaitingUpstream = false;
          if (text === undefined) break;
          reader.push(text, parts);
          // Before an end that came in the same read: a flood and its [DONE] together are cut too.
          if (isPastBounds(context.usageBounds, mapper)) return endPastBound(parts);
          if (reader.done || reader.streamError !== undefined) {
            // The answer is over ([DONE] or an error event): the rest of the body is only read
            // so that the connection is reused, and not waited for.
            current.drain(DRAIN_AFTER_END_MS);
            break;
          }
          // Nothing after an answer too long is read: the connection goes, the next read throws.
          if (reader.outgrown()) current.abort(new AttemptStopped("answer too long"));
          if (mapper.rawFinishReason !== undefined) watch.shortenIdle(FINISH_GRACE_MS);
          if (parts.length > 0 && reader.streamError === undefined) {
            produced = true;
            return { kind: "parts", parts, last: false };
          }
        }
        reader.end(parts);
        return conclude(parts, undefined);
      } catch (error) {
        return awaitingUpstream ? conclude(parts, error) : failInternally(parts, error);
      }
    },
    dispose() {
      if (stage === "over") return;
      finishUp("cancelled");
      current.abort(new AttemptStopped("disposed"));
    },
  };
}

/**
 * The outcome of a connection that broke (closed, reset, not HTTP) before the answer's end: the
 * way to the upstream failed only if no status had come; after a 2xx the answer broke, as a
 * stream that ends too soon does, and after another status it was that status's error answer.
 */
function brokenAfterStatus(status: number | undefined): UpstreamAttemptOutcome {
  if (status === undefined) return "transport_error";
  return status >= 200 && status < 300 ? "stream_error" : "http_error";
}

/** `model_unavailable`: the engine closed (shutdown or reload) while the request ran. */
export function closingError(modelId: string): AppError {
  return new AppError(
    "model_unavailable",
    `The model '${modelId}' was unloaded while the request ran (the server is shutting down or reloading). Please retry.`,
    { retryAfterSeconds: 1 },
  );
}

/**
 * Whether a body begins as an event stream does (after any byte-order mark and blank lines): with
 * a field (`data:`, `event:`, `id:`, `retry:`) or a comment (`:`). JSON begins otherwise.
 */
function looksLikeEventStream(text: string): boolean {
  return /^\uFEFF?\s*(?:data|event|id|retry)?:/.test(text);
}
