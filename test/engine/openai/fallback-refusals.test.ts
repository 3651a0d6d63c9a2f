/**
 * A fallback that refuses the request itself (400, 413) says why in the primary's error: the
 * client learns what to change. Regression: a fallback's 413 (the request too large for it) was
 * lost behind the primary's "refused the connection. Please retry later.", retried every second.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { AppError } from "../../../src/errors/app-error.ts";
import { findFreePort } from "../../support/free-port.ts";
import {
  closeEnginesAndMocks,
  createTestEngine,
  firstError,
  startTestMock,
  upstreamModel,
} from "./engine-helpers.ts";
import { answerError } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

describe("upstream engine: a fallback that refuses the request", () => {
  it.each([400, 413])("is named with its reason when it answers %i", async (status) => {
    const closedPort = await findFreePort();
    const refusing = await startTestMock(
      answerError(status, {
        error: { message: "the request is too large for this server", type: "invalid_request_error" },
      }),
    );
    const backup = createTestEngine({
      model: upstreamModel([refusing.baseUrl], { id: "backup" }),
      settings: { maxRetries: 0 },
    });
    const engine = createTestEngine({
      model: upstreamModel([`http://127.0.0.1:${closedPort}/v1`], { fallbacks: ["backup"] }),
      resolveEngine: (id) => (id === "backup" ? backup : undefined),
      settings: { maxRetries: 0 },
    });
    const error = (await firstError(engine)) as AppError;
    expect(error.message).toContain("The fallback model 'backup' cannot take it:");
    // The primary may be back for a retry: it still says so.
    expect(error.retryable).toBe(true);
  });
});
