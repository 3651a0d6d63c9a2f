import type { CatalogModel } from "../catalog/catalog.ts";
import type { FinishReason, Usage } from "../engine/engine.ts";
import type { ErrorCode } from "../errors/error-catalog.ts";
import type { RequestKey } from "./request-key.ts";

/** What admission knows about a request once the engine has measured it. */
export interface AdmissionRequest {
  requestId: string;
  key: RequestKey;
  model: CatalogModel;
  promptTokens: number;
  /** The most completion tokens the run can produce: prices the reservation. */
  maxCompletionTokens: number;
  user: string | undefined;
}

/** How a run ended, for settlement. */
export interface RunOutcome {
  usage: Usage;
  finishReason: FinishReason | undefined;
  errorCode: ErrorCode | undefined;
  /** Milliseconds from admission to the first part, and to the end. */
  timings: { firstPartMs: number | undefined; totalMs: number };
}

/** A request admitted to run; settle it exactly once, whatever happens. */
export interface AdmissionTicket {
  settle(outcome: RunOutcome): Promise<void>;
}

/**
 * The seam where rate limits and billing plug into the chat pipeline: `admit` runs after the
 * request is measured and before it waits for the model (reserve), and throws an AppError to
 * refuse it (429, 403); the ticket's `settle` runs when the run ends, before its last byte is sent.
 */
export interface ChatAdmission {
  admit(request: AdmissionRequest): Promise<AdmissionTicket>;
}

/** Admission without limits or billing: every request runs and costs nothing. */
export const unlimitedAdmission: ChatAdmission = {
  async admit() {
    return { async settle() {} };
  },
};
