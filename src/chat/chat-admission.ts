import type { CatalogModel } from "../catalog/catalog.ts";
import type { AlternateBound, FinishReason, Usage } from "../engine/engine.ts";
import type { ErrorCode } from "../errors/error-catalog.ts";
import type { RequestKey } from "./request-key.ts";

/** Sets a response header; admission reports rate-limit state through it. */
export type SetHeader = (name: string, value: string) => void;

/** Adds fields to the request's log line (never prompts or secrets). */
export type Annotate = (fields: Record<string, string | number | boolean | undefined>) => void;

/** What admission knows about a request before the engine measured it. */
export interface AdmissionContext {
  requestId: string;
  key: RequestKey;
  model: CatalogModel;
  user: string | undefined;
  setHeader: SetHeader;
  annotate: Annotate;
}

/** What admission knows once the engine has measured the request. */
export interface AdmissionRequest extends AdmissionContext {
  promptTokens: number;
  /** The most prompt tokens it can count where `promptTokens` is an estimate: prices the reservation. */
  promptTokensAtMost?: number | undefined;
  /** The most completion tokens the run can produce: prices the reservation. */
  maxCompletionTokens: number;
  /** Other catalogue models that may serve the request (fallbacks): the reservation covers the dearest. */
  alternateModels?: readonly CatalogModel[];
  /** What some alternates can cost (by id), each pricing its own share of the reservation. */
  alternateBounds?: ReadonlyMap<string, AlternateBound> | undefined;
  /**
   * Whether the client reads the answer as it is generated (SSE): it has what it is charged for
   * before the charge is settled. A whole answer (false) is sent only after its settle charged
   * it, so a shutdown must not keep its charge beyond the process before then (see
   * `BillingAdmission.beginClosing`). Unset, it is taken as streamed.
   */
  streamed?: boolean | undefined;
}

/** How a run ended, for settlement. */
export interface RunOutcome {
  usage: Usage;
  finishReason: FinishReason | undefined;
  /** Why the run failed, or `client_closed` when its client went away before it ended. */
  errorCode: ErrorCode | "client_closed" | undefined;
  /**
   * Milliseconds from admission to the first part and to the end (both with the wait in the
   * model's queue), and of that wait alone where the engine has a queue.
   */
  timings: { firstPartMs: number | undefined; totalMs: number; queueMs?: number | undefined };
  /** The model that served the run when it was one of the alternates; it prices the usage. */
  servedBy?: CatalogModel | undefined;
  /**
   * The client got an error instead of the answer the run generated (a non-streamed request
   * that failed or was cut by a shutdown after it began to generate): its usage is recorded and
   * nothing is charged for it. A client that left is not this: it chose to stop.
   */
  unanswered?: boolean | undefined;
  /**
   * The run took nothing of its model: refused (overloaded, unavailable), failed before its
   * answer began, or ended while it waited for its turn. Its key's token rate gets the whole
   * estimate back, as its account gets the whole reservation.
   */
  unstarted?: boolean | undefined;
}

/** A request admitted to run; settle it exactly once, whatever happens. */
export interface AdmissionTicket {
  settle(outcome: RunOutcome): Promise<void>;
}

/**
 * The seam where rate limits and billing plug into the chat pipeline. `checkRequestRate` runs
 * before the engine measures the request (request-rate limits, 429); `admit` runs after it
 * and before the request waits for the model (token-rate limits, 429; the reservation, 403),
 * and throws an AppError to refuse. The ticket's `settle` runs when the run ends, before the
 * last byte is sent.
 */
export interface ChatAdmission {
  checkRequestRate(context: AdmissionContext): Promise<void>;
  /**
   * Refuses (429) a request the engine found too large for the context when the key's token
   * rate has no room for `tokens` either (SPEC section 11: rate limits before the context
   * length); spends nothing.
   */
  checkTokenRate(context: AdmissionContext, tokens: number): Promise<void>;
  admit(request: AdmissionRequest): Promise<AdmissionTicket>;
}

/** Admission without limits or billing: every request runs and costs nothing. */
export const unlimitedAdmission: ChatAdmission = {
  async checkRequestRate() {},
  async checkTokenRate() {},
  async admit() {
    return { async settle() {} };
  },
};
