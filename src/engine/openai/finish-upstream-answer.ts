import { AppError } from "../../errors/app-error.ts";
import type { StreamPart, Usage } from "../engine.ts";
import type { ChunkMapper } from "./create-chunk-mapper.ts";
import type { UpstreamEndpoint } from "./create-upstream-endpoint.ts";
import { mapFinishReason } from "./map-finish-reason.ts";
import type { AttemptContext } from "./upstream-attempt.ts";

/**
 * The `finish` part of an answer the mapper read: what it still holds flushed into `parts` first.
 * `cut`: the client left before the answer's end (`abort`), or Tollgate ended it where it went
 * past the `max_tokens` sent upstream (`length`, as an upstream that honoured it ends). An answer
 * whose usage counts more than that `max_tokens` ends for its `length` too.
 */
export function finishAnswer(
  mapper: ChunkMapper,
  parts: StreamPart[],
  promptTokens: number,
  cut?: "abort" | "length",
): StreamPart {
  mapper.flush(parts);
  // An answer cut before its end is incomplete; any other that reaches here ended.
  const usage = usageSoFar(mapper, promptTokens, cut === undefined);
  if (cut === "abort") return { type: "finish", reason: "stop", rawReason: cut, usage };
  if (cut === "length") return { type: "finish", reason: "length", rawReason: cut, usage };
  // Charged at the `max_tokens` it was sent, as one that honoured it would have ended (the text
  // that came within the slack past it is passed on all the same).
  if (mapper.ignoredMaxTokens)
    return { type: "finish", reason: "length", rawReason: mapper.rawFinishReason, usage };
  return {
    type: "finish",
    reason: mapFinishReason(mapper.rawFinishReason, { calledTools: mapper.calledTools }),
    rawReason: mapper.rawFinishReason,
    usage,
  };
}

/** How an upstream broke an answer after it started, completing "The upstream server of the model 'x' ...". */
export interface StreamFault {
  /** For the operator's log line: quotes nothing the upstream said that may repeat the prompt. */
  summary: string;
  /** For the client, with the upstream's message (describeStreamError). Default `summary`. */
  shownSummary?: string | undefined;
  /** The type and code of the error the upstream sent, for the log line. */
  upstreamBody?: string | undefined;
}

/**
 * The `error` part that ends an answer the upstream broke after it started: what the mapper still
 * holds flushed into `parts` first, logged for the operator (`fault.summary`, never the upstream's
 * message, which may quote the prompt), told to the client (`fault.shownSummary`).
 */
export function midStreamError(
  fault: StreamFault,
  parts: StreamPart[],
  mapper: ChunkMapper,
  context: Pick<AttemptContext, "modelId" | "logger" | "promptTokens">,
  endpoint: UpstreamEndpoint,
): StreamPart {
  const { modelId } = context;
  mapper.flush(parts);
  context.logger.warn(
    { model: modelId, endpoint: endpoint.label, failure: fault.summary, upstreamBody: fault.upstreamBody },
    "upstream stream failed after it started",
  );
  const shown = fault.shownSummary ?? fault.summary;
  return {
    type: "error",
    error: new AppError(
      "upstream_unavailable",
      `The upstream server of the model '${modelId}' ${shown}; the answer is incomplete. Please retry.`,
    ),
    usage: usageSoFar(mapper, context.promptTokens, false),
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
export function usageSoFar(mapper: ChunkMapper, promptTokens: number, ended: boolean): Usage {
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
  // No more than the bounds allow (see UsageBounds): what came past them, the upstream generated
  // ignoring the max_tokens it was sent, or the model's context.
  const cap = mapper.completionCap;
  const usage: Usage = {
    promptTokens: reportedPrompt ?? promptTokens,
    completionTokens: cap === undefined ? completionTokens : Math.min(cap, completionTokens),
  };
  if (
    reportedPrompt === undefined ||
    usage.completionTokens !== reportedCompletion ||
    reported?.estimated === true
  )
    usage.estimated = true;
  return usage;
}
